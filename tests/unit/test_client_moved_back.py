"""A counter that moved back (its table restored from an earlier backup)
hands out again IDs it handed out before. A Sequence (threads or asyncio)
refuses a block that overlaps the IDs it was given from that counter and
region, hands none of it out, and tells its callers CounterMovedBack (status
0, code counter_moved_back); the service's own answer (HTTP 500
counter_moved_back) is raised as CounterMovedBack at once, never retried."""

from __future__ import annotations

import asyncio
import threading

import pytest

from idblocks import (
    AsyncSequence,
    CounterMovedBack,
    FailoverBackend,
    HttpBackend,
    RetryPolicy,
    Sequence,
    ServiceError,
    ServiceUnavailable,
    cli,
)
from idblocks.async_backend import AsyncHttpBackend
from idblocks.block import Block
from idblocks.testing import AsyncMemoryBackend, MemoryBackend
from tests.support.stub_http import StubServer
from tests.support.waiting import wait_until

MOVED_BACK = (
    500,
    {},
    {
        "error": {
            "code": "counter_moved_back",
            "message": "counter 'orders' was given IDs 5-14, at or below 30, the highest it had taken",
        }
    },
)


def draw(seq: Sequence, count: int) -> tuple[list[int], list[CounterMovedBack]]:
    """``count`` calls of next_id: the IDs, and the CounterMovedBack told."""
    ids, told = [], []
    for _ in range(count):
        try:
            ids.append(seq.next_id())
        except CounterMovedBack as exc:
            told.append(exc)
    return ids, told


def test_a_block_overlapping_ids_given_before_is_refused_and_the_caller_told():
    # Given a Sequence that was given 1..30 and handed out 1..25
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    before, _ = draw(seq, 25)
    # When the counter moves back to 5 (restored from a backup)
    backend.move_back(5)
    after, told = draw(seq, 40)
    unused = seq.close()
    # Then what it held is handed out, every block at or below 30 is refused
    # (5..14, 15..24, 25..34), each told to a caller, and it goes on above them
    assert after == list(range(26, 31)) + list(range(35, 35 + 32))
    assert [(exc.status, exc.code) for exc in told] == [(0, "counter_moved_back")] * 3
    assert "[5, 14]" in told[0].message
    assert "below 30" in told[0].message
    assert len(set(before + after)) == len(before + after)
    # and every ID it was given is handed out or counted unused
    assert len(before + after) + unused == backend.handed_out


def test_a_prefetched_block_that_overlaps_is_told_before_any_later_block_is_fetched():
    # Given a Sequence with prefetch, whose next block (fetched ahead) overlaps
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", block_size=10)
    first, _ = draw(seq, 4)
    backend.move_back(3)
    first += draw(seq, 2)[0]  # past the prefetch mark: the block 3..12 is asked for
    assert wait_until(lambda: backend.calls == 2 and not seq._fetching)
    # When the callers use what is held (a take past the mark among them),
    # and then need more
    held = list(seq.take(2))
    assert wait_until(lambda: not (seq._signal.want or seq._fetching))  # a prefetch it made has landed
    more, told_early = draw(seq, 2)
    with pytest.raises(CounterMovedBack) as told:
        seq.next_id()
    calls_when_told = backend.calls
    later, _ = draw(seq, 3)
    seq.close()
    # Then the IDs held come first, then the caller is told, and only then is
    # a block asked for again; no ID of 3..12 is handed out
    assert (first, held + more, told_early) == ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10], [])
    assert told.value.status == 0
    assert calls_when_told == 2
    assert later == [13, 14, 15]


def test_take_is_told_as_next_id_is():
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    assert seq.take(10) == range(1, 11)
    backend.move_back(8)
    with pytest.raises(CounterMovedBack):
        seq.take(5)  # the block 8..17 overlaps
    assert seq.take(5) == range(18, 23)
    seq.close()


async def settled() -> None:
    """Until a request AsyncMemoryBackend answers at once has landed."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_an_async_sequence_refuses_the_block_and_tells_its_callers():
    async def program():
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "orders", block_size=10) as seq:
            before = [await seq.next_id() for _ in range(6)]  # the next block is fetched ahead
            backend.memory.move_back(2)
            await settled()  # 2..11 lands, and is refused
            before += list(await seq.take(2))  # past the mark again
            await settled()  # a block fetched ahead now would land
            before += [await seq.next_id() for _ in range(2)]
            told = None
            try:
                await seq.next_id()
            except CounterMovedBack as exc:
                told = exc
            after = [await seq.next_id() for _ in range(3)]
        return before, told, after, seq.unused_ids, backend.handed_out

    before, told, after, unused, given = asyncio.run(program())
    assert told is not None, (before, after)
    # The block fetched ahead, 2..11, is refused: what was held is handed
    # out, then a caller is told, and the next block is 12..21
    assert before == list(range(1, 11))
    assert (told.status, told.code) == (0, "counter_moved_back")
    assert after == list(range(12, 15))
    assert len(before + after) + unused == given


def test_another_regions_lower_ids_are_not_a_move_back():
    """A failover interleaves two regions' IDs: each region's own increase,
    and only a block below what its own region gave is refused."""
    even, odd = MemoryBackend(start=2, step=2), MemoryBackend(start=1001, step=2)
    backend = FailoverBackend([odd, even])
    seq = Sequence(backend, "orders", block_size=5, prefetch=False)
    ids, told = draw(seq, 5)  # 1001..1009 from the first region
    odd.fail_next(1)  # unavailable: the next block comes from the other region, far below
    ids += draw(seq, 5)[0]
    assert told == []
    assert ids == [1001, 1003, 1005, 1007, 1009, 2, 4, 6, 8, 10]
    even.move_back(4)  # that region moves back
    with pytest.raises(CounterMovedBack):
        seq.next_id()  # 4..12 is refused
    ids += draw(seq, 3)[0]
    seq.close()
    assert ids[-3:] == [14, 16, 18]
    assert len(set(ids)) == len(ids)


def test_the_services_counter_moved_back_is_raised_at_once_never_retried():
    sleeps: list[float] = []
    with StubServer([MOVED_BACK, MOVED_BACK, MOVED_BACK]) as stub:
        backend = HttpBackend(stub.url, retry=RetryPolicy(sleep=sleeps.append))
        with pytest.raises(CounterMovedBack) as caught:
            backend.allocate("orders", 10)
    assert (caught.value.status, caught.value.code) == (500, "counter_moved_back")
    assert isinstance(caught.value, ServiceError)
    assert (len(stub.requests), sleeps) == (1, [])


def test_the_async_backend_raises_it_at_once_too():
    async def allocate(url):
        backend = AsyncHttpBackend(url)
        try:
            return await backend.allocate("orders", 10)
        finally:
            await backend.aclose()

    with StubServer([MOVED_BACK, MOVED_BACK, MOVED_BACK]) as stub, pytest.raises(CounterMovedBack) as caught:
        asyncio.run(allocate(stub.url))
    assert caught.value.status == 500
    assert len(stub.requests) == 1


def test_a_sequence_tells_its_caller_what_the_service_said():
    with StubServer([MOVED_BACK]) as stub:
        seq = Sequence(HttpBackend(stub.url), "orders", prefetch=False)
        with pytest.raises(CounterMovedBack, match="at or below 30"):
            seq.next_id()
        seq.close()
    assert len(stub.requests) == 1


def test_the_command_line_says_the_counter_moved_back_and_what_to_do(capsys):
    with StubServer([MOVED_BACK]) as stub, pytest.raises(SystemExit) as exited:
        cli.main(["--endpoint", stub.url, "batch", "orders", "10"])
    _, err = capsys.readouterr()
    assert exited.value.code == 1
    assert err.count("\n") == 1
    assert err.startswith("idblocks: error: counter_moved_back: ")
    assert "at or below 30" in err
    assert "idblocks set orders" in err
    assert len(stub.requests) == 1


class SlowToAnswer(MemoryBackend):
    """Answers the next block request only once ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.go.set()

    def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> Block:
        assert self.go.wait(30)
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def test_a_block_that_overlaps_answered_after_its_caller_stopped_waiting_is_told_to_the_next():
    # Given a Sequence that used its first block, and a counter that moved back
    backend = SlowToAnswer()
    seq = Sequence(backend, "orders", block_size=10, prefetch=False, wait_timeout=0.05)
    first, _ = draw(seq, 10)
    backend.move_back(4)
    # When the caller that asked for the next block stops waiting before the
    # overlapping block is answered
    backend.go.clear()
    with pytest.raises(ServiceUnavailable):
        seq.next_id()
    backend.go.set()
    assert wait_until(lambda: backend.calls == 2 and not seq._fetching)  # white-box: settled
    # Then the next caller is told, before any block is asked for again
    with pytest.raises(CounterMovedBack):
        seq.next_id()
    assert backend.calls == 2
    later, told = draw(seq, 2)
    seq.close()
    assert (first, later, told) == (list(range(1, 11)), [14, 15], [])
