"""AsyncSequence never blocks the event loop while it refills: while each
refill's request is on the way, other tasks on the loop go on running.
Counted, not timed: a ticker counts the times it ran while a request was in
flight, which is zero when a refill holds the loop and never zero when it
does not, however slow the machine (tests/unit/test_client_async_sequence.py
holds the rest of AsyncSequence's promises)."""

from __future__ import annotations

import asyncio

from idblocks import AsyncSequence
from idblocks.testing import AsyncMemoryBackend

# Generous ceiling for the ticker to see that it should stop.
ONE_REQUEST = 30.0
# Each refill's latency: half waited before the block is taken, half after.
REFILL = 0.2
REFILLS = 3


def ticks_while_refilling(backend: AsyncMemoryBackend) -> int:
    """Tasks draw IDs as request handlers would, through blocks of 100 from
    ``backend``, until REFILLS blocks came; meanwhile a ticker wakes every
    millisecond. Returns how many times it ran while a request was in flight."""

    async def main():
        seq = AsyncSequence(backend, "lag", block_size=100)
        done = asyncio.Event()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.001)
                ticks += backend.in_flight > 0

        async def handler():
            while not done.is_set():
                await seq.next_id()
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        handlers = [asyncio.create_task(handler()) for _ in range(50)]
        while len(backend.blocks) < REFILLS:
            await asyncio.sleep(0.01)
        done.set()
        await asyncio.wait_for(ticking, ONE_REQUEST)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await seq.aclose()
        return ticks

    return asyncio.run(main())


def test_refills_on_the_network_never_stall_the_loop():
    assert ticks_while_refilling(AsyncMemoryBackend(latency=REFILL)) >= REFILLS


def test_the_count_sees_a_refill_that_blocks_the_loop():
    """The check above can fail: a backend that sleeps without awaiting holds
    the loop for the whole request, so nothing else runs while it is in flight."""
    assert ticks_while_refilling(AsyncMemoryBackend(latency=REFILL, blocking=True)) == 0
