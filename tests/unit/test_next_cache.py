"""The cached-next policy on its own: a fake counter item stands in for the
store's conditional writes, a fake clock for time."""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter as Tally

import pytest

from idblocks_core.domain.errors import CacheBelowCount, CounterExhausted, CounterNotFound, ServiceUnavailable
from idblocks_core.domain.model import Block
from idblocks_core.logic.next_cache import BLOCK_LIFETIME_SECONDS, NextCache

LIFE = BLOCK_LIFETIME_SECONDS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeItem:
    """One counter as the store's writes see it: a block of ``count`` IDs in
    the counter's residue, refused above the cache setting (but one ID is
    always allowed) and past max; each write leaves its token, an admin
    write removes it, and ``keep`` holds while a block's write is the last."""

    def __init__(self, *, cache: int, max_id: int = 10**12, step: int = 1, residue: int = 0) -> None:
        self.cache = cache
        self.max_id = max_id
        self.step = step
        self.hwm = (1 + (residue - 1) % step) - step  # the residue's first ID, less step
        self.deleted = False
        self.token: str | None = None
        self.calls: list[int] = []
        self.keeps: list[int] = []
        self.lock = threading.Lock()
        self.on_write = lambda: None

    def reserve(self, name: str, count: int) -> Block:
        self.on_write()
        with self.lock:
            self.calls.append(count)
            if self.deleted:
                raise CounterNotFound(name)
            if count > max(1, self.cache):
                raise CacheBelowCount(name, count, self.cache)
            span = count * self.step
            if self.max_id - self.hwm < span:
                raise CounterExhausted(name, count, self.hwm + self.step, self.max_id, self.step)
            self.hwm += span
            self.token = f"write-{len(self.calls)}"
            return Block(
                self.hwm - span + self.step, self.hwm, step=self.step, token=self.token, cache=self.cache
            )

    def keep(self, name: str, end: int, token: str) -> bool:
        with self.lock:
            self.keeps.append(end)
            return not self.deleted and self.token == token and self.hwm == end

    def admin_write(
        self, *, next_id: int | None = None, cache: int | None = None, delete: bool = False
    ) -> None:
        """A PUT or a DELETE: like every admin write, it removes the token."""
        with self.lock:
            self.token = None
            if next_id is not None:
                self.hwm = next_id - self.step
            if cache is not None:
                self.cache = cache
            self.deleted = self.deleted or delete

    @property
    def writes(self) -> int:
        return len(self.calls)


def policy(item: FakeItem, clock: FakeClock | None = None, **kwargs) -> NextCache:
    return NextCache(item.reserve, item.keep, clock=clock or FakeClock(), **kwargs)


def calls_apart(cache: NextCache, clock: FakeClock, n: int, seconds: float, name: str = "c") -> list[int]:
    ids = []
    for _ in range(n):
        ids.append(cache.next_id(name).id)
        clock.now += seconds
    return ids


# -- how big ------------------------------------------------------------------------


def test_cache_one_is_a_write_per_id_and_keeps_nothing() -> None:
    """The default: every next is its own write of one ID, nothing held."""
    item = FakeItem(cache=1)
    cache = policy(item)
    served = [cache.next_id("c") for _ in range(5)]
    assert [s.id for s in served] == [1, 2, 3, 4, 5]
    assert all(not s.from_memory for s in served)
    assert item.calls == [1, 1, 1, 1, 1]
    assert cache.held("c") == 0


def test_the_first_block_is_one_id_and_blocks_grow_32_fold_under_load_up_to_the_cache() -> None:
    """Requests faster than the clock can tell apart: 1, 32, then the cache
    setting the writes reported, with no write refused on the way."""
    item = FakeItem(cache=100)
    cache = policy(item)
    served = [cache.next_id("c") for _ in range(250)]
    assert [s.id for s in served] == list(range(1, 251))
    assert item.calls == [1, 32, 100, 100, 100]
    assert [s.taken.count for s in served if s.taken] == [1, 32, 100, 100, 100]
    assert cache.held("c") == 333 - 250


def test_six_calls_a_quarter_second_apart_take_a_few_ids_not_the_cache() -> None:
    """cache 1,000: one ID, then a block sized to four calls a second for
    half a minute but at most 32 times the first; the rest from it."""
    item, clock = FakeItem(cache=1_000), FakeClock()
    cache = policy(item, clock)
    assert calls_apart(cache, clock, 6, 0.25) == [1, 2, 3, 4, 5, 6]
    assert item.calls == [1, 32]
    assert item.hwm == 33


@pytest.mark.parametrize(("per_second", "block"), [(0.2, 6), (2.0, 60), (20.0, 600)])
def test_a_steady_rate_takes_blocks_of_about_half_a_minute_of_it(per_second, block) -> None:
    """After the growth, each block is what the environment serves in half a
    block's life; ten minutes skip less than one block."""
    item, clock = FakeItem(cache=1_000), FakeClock()
    cache = policy(item, clock)
    n = int(600 * per_second)
    assert calls_apart(cache, clock, n, 1 / per_second) == list(range(1, n + 1))
    assert item.calls[-1] == pytest.approx(block, rel=0.05)
    assert item.hwm - n < block
    # Blocks drain in half their life: none expired with IDs left, so none was asked to be kept.
    assert item.keeps == []


def test_a_slower_rate_shrinks_the_blocks_within_a_blocks_life() -> None:
    """From 20 calls a second to one every 5 s (no block kept: another
    environment writes): the block that spans the change sizes the next one
    on both rates, the one after on the slow rate alone."""
    item, clock = FakeItem(cache=1_000), FakeClock()
    cache = NextCache(item.reserve, lambda name, end, token: False, clock=clock)
    calls_apart(cache, clock, 600, 0.05)
    assert item.calls == [1, 32, 600]
    calls_apart(cache, clock, 40, 5.0)
    assert item.calls[3] < 600
    assert item.calls[-1] == pytest.approx(6, abs=1)


def test_a_burst_in_a_quiet_environment_takes_32_ids_not_the_cache() -> None:
    item, clock = FakeItem(cache=1_000), FakeClock()
    cache = policy(item, clock)
    calls_apart(cache, clock, 3, 30.0)  # quiet: blocks of 1
    assert item.calls == [1, 1, 1]
    calls_apart(cache, clock, 2, 0.001)  # then two requests a millisecond apart
    assert item.calls == [1, 1, 1, 1, 32]
    assert item.hwm == 36


def test_a_put_of_cache_is_obeyed_from_the_next_block() -> None:
    """Lowered below what the environment asks for: the write is refused
    naming the setting, and the block is of the setting. Raised: the next
    write shows it, and the blocks after it grow to it."""
    item = FakeItem(cache=64)
    cache = policy(item)
    assert [cache.next_id("c").id for _ in range(97)] == list(range(1, 98))  # blocks 1, 32, 64
    item.admin_write(cache=5)
    assert cache.next_id("c").id == 98
    assert item.calls[-2:] == [64, 5]  # asked for what the last write showed, refused, then 5
    assert cache.held("c") == 4
    [cache.next_id("c") for _ in range(4)]
    item.admin_write(cache=1_000)
    [cache.next_id("c") for _ in range(5)]
    assert item.calls[-1] == 5  # the setting the last write showed; this write shows the new one
    cache.next_id("c")
    assert item.calls[-1] == 160  # 32 times the last block, within the new setting


def test_a_setting_lowered_again_during_the_request_ends_in_a_block_of_one() -> None:
    """Each write lowers the setting below what the refusal before named:
    the environment asks for the setting once, then for one ID."""
    item = FakeItem(cache=64)
    cache = policy(item)
    [cache.next_id("c") for _ in range(33)]  # blocks 1 and 32, drained

    def an_admin_lowers_it() -> None:
        item.cache = max(1, item.cache // 2)

    item.on_write = an_admin_lowers_it
    assert not cache.next_id("c").from_memory
    assert item.calls[2:] == [64, 32, 1]


def test_near_max_the_block_shrinks_so_every_id_is_handed_out() -> None:
    """max 10, cache 4: 1, 4, 4, then a refused block of 4 becomes a block of
    the 1 left; then 409 exhausted, worded for the one ID asked for."""
    item = FakeItem(cache=4, max_id=10)
    cache = policy(item)
    assert [cache.next_id("c").id for _ in range(10)] == list(range(1, 11))
    assert item.calls == [1, 4, 4, 4, 1]
    with pytest.raises(CounterExhausted) as refused:
        cache.next_id("c")
    assert refused.value.left == 0
    assert "cannot hand out 1 more ID" in str(refused.value)


def test_with_regions_blocks_stay_in_the_residue_up_to_max() -> None:
    """Step 3, residue 2: every ID is 2 mod 3, and the last block shrinks to
    the residue's IDs left below max."""
    item = FakeItem(cache=5, max_id=40, step=3, residue=2)
    cache = policy(item)
    ids = [cache.next_id("c").id for _ in range(13)]
    assert ids == list(range(2, 41, 3))
    with pytest.raises(CounterExhausted):
        cache.next_id("c")


def test_a_shrunken_block_refused_again_shrinks_again() -> None:
    """Another environment takes part of what was left between the refusal
    and the shrunken write: the policy asks for what is left then."""
    item = FakeItem(cache=10, max_id=25)
    cache = policy(item)
    assert cache.next_id("c").id == 1
    item.hwm = 18  # 7 left

    def someone_else_takes_three() -> None:
        if item.calls == [1, 10]:
            item.hwm += 3

    item.on_write = someone_else_takes_three
    assert cache.next_id("c").id == 22
    assert item.calls == [1, 10, 7, 4]
    assert [cache.next_id("c").id for _ in range(3)] == [23, 24, 25]


def test_a_cache_setting_lowered_in_the_last_round_is_a_refusal_to_retry() -> None:
    """Every round refused anew, fewer IDs left and then a smaller cache
    setting in the last: the caller is told to try again (503), not given a
    server error, and no block is held."""
    answers = iter(
        [
            Block(1, 1),
            CacheBelowCount("c", 32, 8),
            CounterExhausted("c", 8, 95, 100),  # 6 left
            CounterExhausted("c", 6, 97, 100),  # 4 left
            CacheBelowCount("c", 4, 2),
        ]
    )
    asked: list[int] = []

    def reserve(name: str, count: int) -> Block:
        asked.append(count)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    cache = NextCache(reserve, lambda name, end, token: False, clock=FakeClock())
    assert cache.next_id("c").id == 1
    with pytest.raises(ServiceUnavailable):
        cache.next_id("c")
    assert asked == [1, 32, 8, 6, 4]
    assert cache.held("c") == 0


def test_counters_are_cached_apart() -> None:
    items = {"a": FakeItem(cache=10), "b": FakeItem(cache=10)}
    cache = NextCache(
        lambda name, count: items[name].reserve(name, count),
        lambda name, end, token: items[name].keep(name, end, token),
        clock=FakeClock(),
    )
    assert [cache.next_id(n).id for n in "abababab"] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert items["a"].calls == items["b"].calls == [1, 10]


# -- how long ------------------------------------------------------------------------


def grown(item: FakeItem, clock: FakeClock, lifetime: float = LIFE) -> NextCache:
    """A policy that served 1 and 2 and holds 3..33 of a block written at
    clock.now."""
    cache = policy(item, clock, block_lifetime_seconds=lifetime)
    cache.next_id("c")
    assert cache.next_id("c").id == 2
    assert cache.held("c") == 31
    return cache


def test_a_block_expires_after_its_lifetime_counted_from_before_the_write() -> None:
    """A slow write does not lengthen a block's life; once the counter has
    been written since, the IDs of an expired block are never served (a
    gap), and the next block follows."""
    clock = FakeClock()
    item = FakeItem(cache=100)
    cache = policy(item, clock)
    assert cache.next_id("c").id == 1
    written_at = clock.now

    def slow_write() -> None:
        clock.now += 20

    item.on_write = slow_write
    assert cache.next_id("c").id == 2  # a block of 32, written from written_at to written_at + 20
    item.on_write = lambda: None
    clock.now = written_at + LIFE - 0.001
    assert cache.next_id("c").from_memory
    item.token = "another environment's"
    clock.now = written_at + LIFE
    served = cache.next_id("c")
    assert not served.from_memory
    assert served.id == 34
    assert item.keeps == [33]


def test_an_expired_block_is_served_on_while_its_write_is_the_counters_last() -> None:
    """Nothing written since: the block is kept for another lifetime, from
    the question, and nothing is taken."""
    clock, item = FakeClock(), FakeItem(cache=1_000)
    cache = grown(item, clock)
    asked_at = clock.now = clock.now + LIFE
    served = cache.next_id("c")
    assert (served.id, served.from_memory) == (3, True)
    assert item.keeps == [33]
    assert (item.hwm, item.writes) == (33, 2)
    clock.now = asked_at + LIFE - 0.001
    assert [cache.next_id("c").id for _ in range(2)] == [4, 5]
    assert item.keeps == [33]  # asked once a life, not per request
    clock.now = asked_at + LIFE
    assert cache.next_id("c").id == 6
    assert item.keeps == [33, 33]


def test_another_environments_write_in_between_means_no_keep() -> None:
    clock, item = FakeClock(), FakeItem(cache=1_000)
    mine = grown(item, clock)
    other = policy(item, clock)
    assert other.next_id("c").id == 34
    clock.now += LIFE
    served = mine.next_id("c")
    assert not served.from_memory
    assert served.id == 35  # 3..33 are a gap
    assert item.keeps == [33]


@pytest.mark.parametrize(
    "change",
    [{"cache": 1_000}, {"cache": 3}, {"next_id": 34}, {"next_id": 500}],
    ids=["put-of-the-same-cache", "put-of-cache", "put-of-the-same-next", "put-of-next"],
)
def test_an_admin_write_in_between_means_no_keep(change) -> None:
    """Even a PUT that changes nothing the block depends on: the store
    cannot tell, and a new block is what the bound promises."""
    clock, item = FakeClock(), FakeItem(cache=1_000)
    cache = grown(item, clock)
    item.admin_write(**change)
    clock.now += LIFE
    served = cache.next_id("c")
    assert not served.from_memory
    assert served.id == change.get("next_id", 34)


def test_a_deleted_counter_stops_serving_once_its_block_expires() -> None:
    clock = FakeClock()
    item = FakeItem(cache=1_000)
    cache = grown(item, clock, lifetime=5)
    item.admin_write(delete=True)
    clock.now += 4.9
    assert cache.next_id("c").id == 3  # still inside the bound the docs state
    clock.now += 0.1
    with pytest.raises(CounterNotFound):
        cache.next_id("c")


def test_an_admin_change_is_seen_within_a_lifetime_after_a_block_was_kept() -> None:
    """Kept at t = 60; a PUT at t = 70 moves next on: the kept block serves
    IDs below it until t = 120, 60 s after its question, never later."""
    clock, item = FakeClock(), FakeItem(cache=1_000)
    start = clock.now
    cache = grown(item, clock)
    clock.now = start + LIFE
    assert cache.next_id("c").id == 3  # kept
    clock.now = start + 70
    item.admin_write(next_id=500)
    clock.now = start + 2 * LIFE - 0.001
    assert cache.next_id("c").id == 4
    clock.now = start + 2 * LIFE
    assert cache.next_id("c").id == 500


def test_a_failed_question_fails_the_request_and_keeps_the_block_for_the_next() -> None:
    clock, item = FakeClock(), FakeItem(cache=1_000)
    cache = grown(item, clock)
    clock.now += LIFE

    def unavailable(name: str, end: int, token: str) -> bool:
        raise ServiceUnavailable("DynamoDB is unavailable, try again shortly")

    cache._keep = unavailable
    with pytest.raises(ServiceUnavailable):
        cache.next_id("c")
    cache._keep = item.keep
    assert cache.next_id("c").id == 3
    assert item.writes == 2


def test_a_block_without_a_token_is_never_kept() -> None:
    """A block whose write did not say its token (a keyed retry's one ID)
    cannot be proved the last: it is dropped, never asked about."""
    clock, item = FakeClock(), FakeItem(cache=1_000)
    written = iter([Block(1, 1), Block(2, 33)])
    cache = NextCache(lambda name, count: next(written), item.keep, clock=clock)
    cache.next_id("c")
    assert cache.next_id("c").id == 2
    clock.now += LIFE
    with pytest.raises(StopIteration):  # a new block asked for
        cache.next_id("c")
    assert item.keeps == []


def test_expired_blocks_of_idle_counters_are_swept_from_memory() -> None:
    """A block that expired less than a lifetime ago may still be kept; one
    idle for longer is dropped from memory."""
    clock = FakeClock()
    item = FakeItem(cache=50)
    cache = policy(item, clock, block_lifetime_seconds=10)
    for i in range(100):
        cache.next_id(f"idle-{i}")
        cache.next_id(f"idle-{i}")
    assert sum(cache.held(f"idle-{i}") for i in range(100)) == 100 * 31
    clock.now += 10
    cache.next_id("busy")
    assert sum(cache.held(f"idle-{i}") for i in range(100)) == 100 * 31
    clock.now += 10
    cache.next_id("busy")
    assert sum(cache.held(f"idle-{i}") for i in range(100)) == 0
    assert list(cache._blocks) == ["busy"]


def test_forget_leaves_the_unserved_ids_as_a_gap() -> None:
    item = FakeItem(cache=10)
    cache = policy(item)
    cache.next_id("c")
    cache.next_id("c")
    cache.forget()
    assert cache.next_id("c").id == 12


# -- exactly once ------------------------------------------------------------------------


def test_threads_never_get_the_same_id() -> None:
    """The dev server's threads share one policy: many threads, small blocks
    and a write that yields mid-way, with thread switches forced as often as
    the interpreter allows; every ID once, none lost but what is still held.
    Blocks of 40 outlast the write of the next: threads that took two blocks
    at once would lose the rest of one."""
    item = FakeItem(cache=40)
    item.on_write = lambda: threading.Event().wait(0.0005)
    cache = policy(item)
    threads_n, per_thread = 8, 400
    got: list[list[int]] = [[] for _ in range(threads_n)]
    start = threading.Barrier(threads_n)

    def work(mine: list[int]) -> None:
        start.wait(timeout=30)
        for _ in range(per_thread):
            mine.append(cache.next_id("c").id)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(got[i],)) for i in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(old)
    ids = [i for mine in got for i in mine]
    duplicates = [i for i, n in Tally(ids).items() if n > 1]
    assert duplicates == []
    assert len(ids) == threads_n * per_thread
    assert sorted(ids) == list(range(1, len(ids) + 1))
    assert item.hwm == len(ids) + cache.held("c")
    for mine in got:  # increasing per environment
        assert mine == sorted(mine)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
# Under pytest-xdist the worker has a thread of its own (execnet's); the child
# only serves one ID from its own cache, writes to a pipe and leaves.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_serve_its_parents_block() -> None:
    """A child holding a copy of the parent's block would hand out the same
    IDs as the parent: it must start empty and take its own block."""
    item = FakeItem(cache=100)
    cache = policy(item)
    assert [cache.next_id("c").id for _ in range(2)] == [1, 2]  # holds 3..33
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once, whatever happens
        try:
            served = cache.next_id("c")
            os.write(write_end, f"{int(served.from_memory)} {served.id}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        report = os.read(read_end, 100).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    # The child's copy of the fake item hands out 34 onwards; the point is
    # that the child wrote instead of serving 3 from the parent's block.
    assert report == "0 34"
    assert cache.next_id("c").id == 3
