"""AsyncSequence never blocks the event loop while it refills: measured as
the worst lateness of a ticker over refills that take a second of real time
each, so it lives with the integration tests (tests/unit/test_client_async_sequence.py
holds the rest of AsyncSequence's promises)."""

from __future__ import annotations

import asyncio

from idblocks import AsyncSequence
from idblocks.testing import AsyncMemoryBackend

# Far longer than a request to AsyncMemoryBackend takes, even on a loaded
# machine: the ticker is given this long to see that it should stop.
ONE_REQUEST = 10.0

# Each refill's latency: a refill that blocked the loop would stall every task
# for at least half of it (AsyncMemoryBackend waits half before the block is
# taken, half after). The bound below is far above what a loop that is never
# blocked shows, even on a loaded machine (milliseconds), and below that.
REFILL = 1.0
STALL = REFILL / 2


def worst_loop_delay(backend: AsyncMemoryBackend, refills: int = 3) -> float:
    """Tasks draw IDs as request handlers would, through blocks of 100 from
    ``backend``, until ``refills`` blocks came; meanwhile a ticker asks to be
    woken every millisecond. Returns its worst lateness, in seconds."""

    async def main():
        seq = AsyncSequence(backend, "lag", block_size=100)
        done = asyncio.Event()
        worst = 0.0

        async def ticker():
            nonlocal worst
            loop = asyncio.get_running_loop()
            while not done.is_set():
                due = loop.time() + 0.001
                await asyncio.sleep(0.001)
                worst = max(worst, loop.time() - due)

        async def handler():
            while not done.is_set():
                await seq.next_id()
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        handlers = [asyncio.create_task(handler()) for _ in range(50)]
        while len(backend.blocks) < refills:
            await asyncio.sleep(0.01)
        done.set()
        await asyncio.wait_for(ticking, ONE_REQUEST)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await seq.aclose()
        return worst

    return asyncio.run(main())


def test_refills_on_the_network_never_stall_the_loop():
    assert worst_loop_delay(AsyncMemoryBackend(latency=REFILL)) < STALL


def test_the_loop_delay_measurement_sees_a_refill_that_blocks_the_loop():
    """The check above can fail: a backend that sleeps without awaiting
    stalls the ticker for at least STALL at each refill."""
    assert worst_loop_delay(AsyncMemoryBackend(latency=REFILL, blocking=True)) >= STALL
