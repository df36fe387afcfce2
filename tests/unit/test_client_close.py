"""close() and aclose() account for every ID taken, however they end and
however many there are: a close that fails, is cancelled or runs out of time
is finished by the next one; a close during another waits for it and
returns the same count; a block that lands after close, of the size asked
or not, adds to what close reports; a timeout of any length works.

Each test holds 139 IDs of a block of 200 (61 handed out) with the next
block's request on the network, the case the counts below are made of."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from idblocks import AsyncSequence, Sequence
from idblocks.testing import LOST_RESPONSE, AsyncMemoryBackend, MemoryBackend
from tests.support.waiting import wait_until

BLOCK = 200
HANDED = 61  # past the prefetch mark (20 into the block, prefetch_at=0.9)
HELD = BLOCK - HANDED


class Gated(MemoryBackend):
    """Answers the first request at once; the later ones wait for ``gate``.
    ``short``: the later ones answer that many IDs fewer than asked."""

    def __init__(self, *, short: int = 0, **options) -> None:
        super().__init__(**options)
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.short = short
        self.interrupt = False

    def allocate(self, counter, count, *, idempotency_key):
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt
        if self.calls:
            self.waiting.set()
            assert self.gate.wait(60), "the test never opened the gate"
            block = self.answer(counter, count - self.short, idempotency_key=idempotency_key)
            return dataclasses.replace(block)
        return self.answer(counter, count, idempotency_key=idempotency_key)


def holding(backend, *, lose: bool = False) -> Sequence:
    """``lose``: the next block's request is applied and its answer lost."""
    seq = Sequence(backend, "orders", block_size=BLOCK, prefetch_at=0.9, wait_timeout=60)
    assert seq.next_id() == 1
    if lose:
        backend.fail_next(1, LOST_RESPONSE)
    assert [seq.next_id() for _ in range(HANDED - 1)] == list(range(2, HANDED + 1))
    return seq


def in_thread(call):
    result: list[object] = []

    def run():
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


# -- Sequence ------------------------------------------------------------------------


def test_a_close_during_another_waits_for_it_and_returns_the_same_count():
    """Reproduces: the second close() returned 0 at once while the first
    waited for the block on the network and then returned 339."""
    backend = Gated()
    seq = holding(backend)
    assert backend.waiting.wait(10)
    first, first_result = in_thread(lambda: seq.close(timeout=60))
    assert wait_until(lambda: len(seq._changed._waiters) >= 1)  # white-box: it waits for the block
    second, second_result = in_thread(seq.close)
    assert wait_until(lambda: second_result or len(seq._changed._waiters) >= 2)
    backend.gate.set()
    for thread in (first, second):
        thread.join(timeout=60)
    assert first_result == second_result == [HELD + BLOCK]
    assert backend.handed_out == HANDED + HELD + BLOCK


@pytest.mark.parametrize("timeout", [float("inf"), 1e10], ids=["inf", "past-TIMEOUT_MAX"])
def test_a_close_with_an_endless_timeout_waits_for_the_block(timeout):
    """Reproduces: close(timeout=float("inf")) raised OverflowError, after
    marking the sequence closed; the next close() returned 0."""
    backend = Gated()
    seq = holding(backend)
    assert backend.waiting.wait(10)
    thread, result = in_thread(lambda: seq.close(timeout=timeout))
    assert wait_until(lambda: result or len(seq._changed._waiters) >= 1)
    backend.gate.set()
    thread.join(timeout=60)
    assert result == [HELD + BLOCK]
    assert seq.close() == HELD + BLOCK


def lost_prefetch(backend: MemoryBackend) -> Sequence:
    """The prefetch request is applied and its answer lost: it stays pending."""
    seq = holding(backend, lose=True)
    assert wait_until(lambda: seq._answers == 2 and not seq._fetching)  # white-box
    assert seq._pending is not None
    return seq


def test_a_close_that_ran_out_of_time_is_finished_by_the_next():
    """Reproduces: close(timeout=0) left a request whose answer was lost
    unasked; close() again returned the same 139, and the 200 IDs the lost
    answer took were never reported."""
    backend = MemoryBackend()
    seq = lost_prefetch(backend)
    assert seq.close(timeout=0) == HELD
    assert seq.close() == HELD + BLOCK
    assert backend.handed_out == HANDED + HELD + BLOCK


def test_a_close_that_failed_is_finished_by_the_next():
    """Reproduces: a close() interrupted while it asked again for a lost
    answer (KeyboardInterrupt) had marked the sequence closed; the next
    close() returned 0."""
    backend = Gated()
    backend.gate.set()
    seq = lost_prefetch(backend)
    backend.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        seq.close()
    assert seq.close() == HELD + BLOCK


def test_a_block_of_the_wrong_size_landing_after_close_is_counted():
    """Reproduces: a block of 190 where 200 were asked, landing after
    close(timeout=0), went into the skipped count, which close had already
    read: unused_ids stayed 139."""
    backend = Gated(short=10)
    seq = holding(backend)
    assert backend.waiting.wait(10)
    assert seq.close(timeout=0) == HELD
    backend.gate.set()
    assert wait_until(lambda: backend.handed_out == HANDED + HELD + BLOCK - 10)
    assert wait_until(lambda: not seq._fetching)  # white-box: the answer is settled
    assert seq.unused_ids == HELD + BLOCK - 10
    assert seq.close() == HELD + BLOCK - 10


@pytest.mark.parametrize("wait_timeout", [float("inf"), 1e10], ids=["inf", "past-TIMEOUT_MAX"])
def test_a_thread_waits_on_another_threads_request_with_an_endless_wait_timeout(wait_timeout):
    """Reproduces: with wait_timeout above threading.TIMEOUT_MAX, a thread
    waiting on another thread's block request raised OverflowError."""
    backend = Gated()
    backend.calls = 1  # white-box: every request waits for the gate
    seq = Sequence(backend, "orders", block_size=10, prefetch=False, wait_timeout=wait_timeout)
    first, first_result = in_thread(seq.next_id)
    assert backend.waiting.wait(10)
    second, second_result = in_thread(seq.next_id)
    # (white-box: both wait on the Sequence's condition, the first for its own request)
    assert wait_until(lambda: second_result or len(seq._changed._waiters) == 2)
    backend.gate.set()
    for thread in (first, second):
        thread.join(timeout=60)
    assert sorted(first_result + second_result) == [1, 2]
    seq.close()


# -- AsyncSequence -----------------------------------------------------------------


class AsyncGated(AsyncMemoryBackend):
    """AsyncMemoryBackend whose requests after the first wait for ``gate``;
    ``short``: those answer that many IDs fewer than asked."""

    def __init__(self, *, short: int = 0) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.short = short

    async def allocate(self, counter, count, *, idempotency_key):
        if self.memory.calls:
            await self.gate.wait()
            count -= self.short
        return await super().allocate(counter, count, idempotency_key=idempotency_key)


async def async_holding(backend, *, lose: bool = False) -> AsyncSequence:
    """``lose``: the next block's request is applied and its answer lost."""
    seq = AsyncSequence(backend, "orders", block_size=BLOCK, prefetch_at=0.9, wait_timeout=60)
    assert await seq.next_id() == 1
    if lose:
        backend.fail_next(1, LOST_RESPONSE)
    assert [await seq.next_id() for _ in range(HANDED - 1)] == list(range(2, HANDED + 1))
    assert seq._request_task is not None  # white-box: the prefetch is on the network
    return seq


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_an_aclose_during_another_waits_for_it_and_returns_the_same_count():
    """Reproduces: the second aclose() returned 0 at once while the first
    waited for the block on the network and then returned 339."""

    async def main():
        backend = AsyncGated()
        seq = await async_holding(backend)
        first = asyncio.create_task(seq.aclose(timeout=60))
        await turns()
        second = asyncio.create_task(seq.aclose())
        await turns()
        backend.gate.set()
        return await asyncio.gather(first, second)

    assert asyncio.run(main()) == [HELD + BLOCK, HELD + BLOCK]


def test_a_cancelled_aclose_is_finished_by_the_next():
    """Reproduces: aclose() cancelled while it waited for the block on the
    network had marked the sequence closed; the next aclose() returned 0,
    and none of the 339 IDs were ever reported."""

    async def main():
        backend = AsyncGated()
        seq = await async_holding(backend)
        closing = asyncio.create_task(seq.aclose())
        await turns()
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        backend.gate.set()
        return await seq.aclose(), backend.handed_out

    assert asyncio.run(main()) == (HELD + BLOCK, HANDED + HELD + BLOCK)


def test_an_aclose_that_ran_out_of_time_is_finished_by_the_next():
    """Reproduces: aclose(timeout=0) left a request whose answer was lost
    unasked; aclose() again returned the same 139."""

    async def main():
        backend = AsyncMemoryBackend()
        seq = await async_holding(backend, lose=True)
        await turns()
        assert seq._pending is not None  # white-box: the answer was lost, the request is pending
        assert seq._request_task is None
        return await seq.aclose(timeout=0), await seq.aclose(), backend.handed_out

    assert asyncio.run(main()) == (HELD, HELD + BLOCK, HANDED + HELD + BLOCK)


def test_a_block_of_the_wrong_size_landing_after_aclose_is_counted():
    """Reproduces: a block of 190 where 200 were asked, landing after
    aclose(timeout=0), was not added to unused_ids (139)."""

    async def main():
        backend = AsyncGated(short=10)
        seq = await async_holding(backend)
        unused = await seq.aclose(timeout=0)
        backend.gate.set()
        await turns()
        return unused, seq.unused_ids, await seq.aclose()

    assert asyncio.run(main()) == (HELD, HELD + BLOCK - 10, HELD + BLOCK - 10)
