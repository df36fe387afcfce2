"""The cached-next policy on its own: a fake counter item stands in for the
store's conditional write, a fake clock for time."""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter as Tally

import pytest

from idblocks_core.domain.errors import CounterExhausted, CounterNotFound
from idblocks_core.domain.model import Block
from idblocks_core.logic.next_cache import BLOCK_LIFETIME_SECONDS, NextCache


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeItem:
    """One counter as the store's write sees it: a block of ``cache`` IDs
    (or ``count``) in the counter's residue, refused past max."""

    def __init__(self, *, cache: int, max_id: int = 10**12, step: int = 1, residue: int = 0) -> None:
        self.cache = cache
        self.max_id = max_id
        self.step = step
        self.hwm = (1 + (residue - 1) % step) - step  # the residue's first ID, less step
        self.deleted = False
        self.calls: list[int | None] = []
        self.lock = threading.Lock()
        self.on_write = lambda: None

    def reserve(self, name: str, count: int | None) -> Block:
        self.on_write()
        with self.lock:
            self.calls.append(count)
            if self.deleted:
                raise CounterNotFound(name)
            span = (self.cache if count is None else count) * self.step
            if self.max_id - self.hwm < span:
                raise CounterExhausted(name, span // self.step, self.hwm + self.step, self.max_id, self.step)
            self.hwm += span
            return Block(self.hwm - span + self.step, self.hwm, step=self.step)

    @property
    def writes(self) -> int:
        return len(self.calls)


def test_cache_one_is_a_write_per_id_and_keeps_nothing() -> None:
    """The default: every next is its own write of one ID, nothing held."""
    item = FakeItem(cache=1)
    cache = NextCache(item.reserve, clock=FakeClock())
    served = [cache.next_id("c") for _ in range(5)]
    assert [s.id for s in served] == [1, 2, 3, 4, 5]
    assert all(not s.from_memory for s in served)
    assert item.writes == 5
    assert cache.held("c") == 0


def test_a_block_of_cache_ids_serves_that_many_nexts_with_one_write() -> None:
    item = FakeItem(cache=100)
    cache = NextCache(item.reserve, clock=FakeClock())
    served = [cache.next_id("c") for _ in range(250)]
    assert [s.id for s in served] == list(range(1, 251))
    assert item.writes == 3
    assert item.calls == [None, None, None]  # the setting is the store's, never guessed here
    assert [s.taken.count for s in served if s.taken] == [100, 100, 100]
    assert sum(s.from_memory for s in served) == 247
    assert cache.held("c") == 50


def test_near_max_the_block_shrinks_so_every_id_is_handed_out() -> None:
    """max 10, cache 4: 4 + 4, then a refused block of 4 becomes a block of
    the 2 left; then 409 exhausted, worded for the one ID asked for."""
    item = FakeItem(cache=4, max_id=10)
    cache = NextCache(item.reserve, clock=FakeClock())
    assert [cache.next_id("c").id for _ in range(10)] == list(range(1, 11))
    assert item.calls == [None, None, None, 2]
    with pytest.raises(CounterExhausted) as refused:
        cache.next_id("c")
    assert refused.value.left == 0
    assert "cannot hand out 1 more ID" in str(refused.value)


def test_with_regions_blocks_stay_in_the_residue_up_to_max() -> None:
    """Step 3, residue 2: every ID is 2 mod 3, and the last block shrinks to
    the residue's IDs left below max."""
    item = FakeItem(cache=5, max_id=40, step=3, residue=2)
    cache = NextCache(item.reserve, clock=FakeClock())
    ids = [cache.next_id("c").id for _ in range(13)]
    assert ids == list(range(2, 41, 3))
    with pytest.raises(CounterExhausted):
        cache.next_id("c")


def test_a_shrunken_block_refused_again_shrinks_again() -> None:
    """Another environment takes part of what was left between the refusal
    and the shrunken write: the policy asks for what is left then."""
    item = FakeItem(cache=10, max_id=25)
    item.hwm = 18  # 7 left
    cache = NextCache(item.reserve, clock=FakeClock())

    def someone_else_takes_three() -> None:
        if item.calls == [None]:
            item.hwm += 3

    item.on_write = someone_else_takes_three
    assert cache.next_id("c").id == 22
    assert item.calls == [None, 7, 4]
    assert [cache.next_id("c").id for _ in range(3)] == [23, 24, 25]


def test_a_block_expires_after_its_lifetime_counted_from_before_the_write() -> None:
    """A slow write does not lengthen a block's life; the IDs of an expired
    block are never served (a gap), and the next block follows."""
    clock = FakeClock()
    item = FakeItem(cache=100)

    def slow_write() -> None:
        clock.now += 20

    item.on_write = slow_write
    cache = NextCache(item.reserve, clock=clock)
    assert cache.next_id("c").id == 1  # written from t=1000 to t=1020
    clock.now = 1000 + BLOCK_LIFETIME_SECONDS - 0.001
    assert cache.next_id("c").from_memory
    clock.now = 1000 + BLOCK_LIFETIME_SECONDS
    served = cache.next_id("c")
    assert not served.from_memory
    assert served.id == 101
    assert item.writes == 2


def test_a_deleted_counter_stops_serving_once_its_block_expires() -> None:
    clock = FakeClock()
    item = FakeItem(cache=1000)
    cache = NextCache(item.reserve, clock=clock, block_lifetime_seconds=5)
    cache.next_id("c")
    item.deleted = True
    clock.now += 4.9
    assert cache.next_id("c").id == 2  # still inside the bound the docs state
    clock.now += 0.1
    with pytest.raises(CounterNotFound):
        cache.next_id("c")


def test_a_put_of_cache_is_obeyed_from_the_next_block() -> None:
    item = FakeItem(cache=3)
    cache = NextCache(item.reserve, clock=FakeClock())
    assert [cache.next_id("c").id for _ in range(2)] == [1, 2]
    item.cache = 1
    assert [cache.next_id("c").id for _ in range(3)] == [3, 4, 5]
    assert cache.held("c") == 0


def test_counters_are_cached_apart() -> None:
    items = {"a": FakeItem(cache=10), "b": FakeItem(cache=10)}
    cache = NextCache(lambda name, count: items[name].reserve(name, count), clock=FakeClock())
    assert [cache.next_id(n).id for n in "abab"] == [1, 1, 2, 2]


def test_expired_blocks_of_idle_counters_are_swept_from_memory() -> None:
    clock = FakeClock()
    item = FakeItem(cache=50)
    cache = NextCache(item.reserve, clock=clock, block_lifetime_seconds=10)
    for i in range(100):
        cache.next_id(f"idle-{i}")
    assert sum(cache.held(f"idle-{i}") for i in range(100)) == 100 * 49
    clock.now += 10
    cache.next_id("busy")
    assert sum(cache.held(f"idle-{i}") for i in range(100)) == 0
    assert len(cache._blocks) == 1


def test_forget_leaves_the_unserved_ids_as_a_gap() -> None:
    item = FakeItem(cache=10)
    cache = NextCache(item.reserve, clock=FakeClock())
    cache.next_id("c")
    cache.forget()
    assert cache.next_id("c").id == 11


def test_threads_never_get_the_same_id() -> None:
    """The dev server's threads share one policy: many threads, small blocks
    and a write that yields mid-way, with thread switches forced as often as
    the interpreter allows; every ID once, none lost but what is still held."""
    item = FakeItem(cache=7)
    item.on_write = lambda: threading.Event().wait(0.0005)
    cache = NextCache(item.reserve, clock=FakeClock())
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
    cache = NextCache(item.reserve, clock=FakeClock())
    assert cache.next_id("c").id == 1
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
    # The child's copy of the fake item hands out 101 onwards; the point is
    # that the child wrote instead of serving 2 from the parent's block.
    assert report == "0 101"
    assert cache.next_id("c").id == 2
