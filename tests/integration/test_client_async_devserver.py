"""AsyncSequence and AsyncHttpBackend against the real service: the dev
server over HTTP, with responses lost on the way and callers cancelled."""

from __future__ import annotations

import asyncio
import random

import pytest

from idblocks import AsyncSequence, Conflict, CounterNotFound, HttpBackend, RetryPolicy
from idblocks.async_backend import AsyncHttpBackend
from tests.support.ledger import next_of, skipped
from tests.support.proxy import LossyProxy


def test_lost_responses_and_cancelled_callers_cost_nothing_over_http(dev):
    async def main(url, proxy):
        rng = random.Random(7)
        # One attempt per request: a lost answer reaches the sequence, which asks again.
        backend = AsyncHttpBackend(url, retry=RetryPolicy(attempts=1))
        handed = []
        async with AsyncSequence(backend, "async-lossy", block_size=20) as seq:

            async def caller():
                for _ in range(30):
                    if rng.random() < 0.1:
                        proxy.lose = 1
                    try:
                        async with asyncio.timeout(rng.choice([None, 0.001, 0.01])):
                            handed.append(await seq.next_id())
                    except TimeoutError:
                        pass

            await asyncio.gather(*(caller() for _ in range(20)))
            proxy.lose = 0
        await backend.aclose()
        return handed, seq.unused_ids

    with LossyProxy(dev.url) as proxy:
        handed, unused = asyncio.run(main(proxy.url, proxy))
        lost = len(proxy.lost)
    assert lost > 0
    assert len(handed) == len(set(handed))
    # the service handed out exactly what was used plus what aclose() counted
    assert next_of(dev, "async-lossy") - 1 == len(handed) + unused


def test_every_admin_call_of_the_async_backend_against_the_dev_server(dev):
    """AsyncHttpBackend had only allocate: an asyncio service that created
    its counters blocked its loop on HttpBackend. Every operation, awaited,
    with what the service answers, the same as HttpBackend's."""

    async def main(url):
        backend = AsyncHttpBackend(url)
        try:
            created = await backend.create("async-admin", start=100, max_id=10_000, cache=5)
            got = await backend.get("async-admin")
            page = await backend.list(limit=1000)
            one = await backend.next("async-admin")
            block = await backend.allocate("async-admin", 10)
            moved = await backend.set_next("async-admin", 500)
            updated = await backend.update("async-admin", cache=1)
            raw = await backend.request("GET", "/admin/counters/async-admin")
            deleted = await backend.delete("async-admin")
            with pytest.raises(CounterNotFound):
                await backend.get("async-admin")
            await backend.create("async-admin-twice")
            with pytest.raises(Conflict, match="counter_exists"):
                await backend.create("async-admin-twice")
            return created, got, page, one, block, moved, updated, raw, deleted
        finally:
            await backend.aclose()

    created, got, page, one, block, moved, updated, raw, deleted = asyncio.run(main(dev.url))
    assert (created["name"], created["next"], created["max"]) == ("async-admin", 100, 10_000)
    assert created["cache"] == 5
    assert got == created
    assert "async-admin" in [counter["name"] for counter in page["counters"]]
    assert one >= 100
    assert len(block) == 10
    assert block.start > one
    assert moved["next"] == 500
    assert (updated["next"], updated["cache"]) == (500, 1)
    assert raw == updated
    assert deleted is None
    # The sync backend answers the same to the same call.
    assert HttpBackend(dev.url).get("async-admin-twice") == asyncio.run(_get(dev.url, "async-admin-twice"))


async def _get(url, name):
    backend = AsyncHttpBackend(url)
    try:
        return await backend.get(name)
    finally:
        await backend.aclose()


# -- what a process skips when it stops ------------------------------------------------
# As tests/integration/test_client_devserver.py's, for AsyncSequence: measured
# by how far the counter moved, the requests by a proxy that forwards them.


async def steadily(seq, rate, count):
    """``await seq.next_id()`` ``count`` times, about ``rate`` times a second
    in ticks of 10 ms (never a catching-up burst): how many seconds it took.
    A count, not a time: however slow the machine, the block given up front
    is used up."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(count // (rate // 100)):
        for _ in range(rate // 100):
            await seq.next_id()
        await asyncio.sleep(0.01)
    return loop.time() - started


def test_an_async_process_that_takes_one_id_and_closes_skips_at_most_15(dev):
    async def main():
        backend = AsyncHttpBackend(dev.url)
        async with AsyncSequence(backend, "async-gaps-one") as seq:
            await seq.next_id()
        await backend.aclose()

    asyncio.run(main())
    assert skipped(dev, "async-gaps-one", 1) <= 15


def test_10000_async_ids_as_fast_as_they_come_skip_at_most_10000_in_at_most_12_requests(dev):
    async def main(url):
        backend = AsyncHttpBackend(url)
        async with AsyncSequence(backend, "async-gaps-burst") as seq:
            for _ in range(10_000):
                await seq.next_id()
        await backend.aclose()

    with LossyProxy(dev.url) as counting:
        asyncio.run(main(counting.url))
        requests = counting.forwarded
    assert skipped(dev, "async-gaps-burst", 10_000) <= 10_000
    assert requests <= 12


def test_after_drain_and_8_s_at_a_steady_async_rate_aclose_skips_at_most_1_s_of_ids(dev):
    rate = 1_000

    async def main():
        # Given a task using about 1,000 IDs/s, with blocks of 5 s (its rate given up front)
        backend = AsyncHttpBackend(dev.url)
        seq = AsyncSequence(backend, "async-gaps-drain", initial_block=5 * rate)
        before = 3 * rate
        await steadily(seq, rate, before)
        # When it drains and goes on at that rate for 8 s (8 s of IDs), then closes
        seq.drain()
        during = 8 * rate
        seconds = await steadily(seq, rate, during)
        await seq.aclose()
        await backend.aclose()
        return before + during, during / seconds

    used, drawn_per_s = asyncio.run(main())
    # Then what it skipped is at most a second's worth at the rate it drew
    assert skipped(dev, "async-gaps-drain", used) <= drawn_per_s
