"""AsyncSequence and AsyncHttpBackend against the real service: the dev
server over HTTP, with responses lost on the way and callers cancelled."""

from __future__ import annotations

import asyncio
import random

import pytest

from devserver.process import DevServer
from idblocks import AsyncSequence, RetryPolicy
from idblocks.async_backend import AsyncHttpBackend
from tests.support.proxy import LossyProxy


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    with DevServer("--fresh", state_file=tmp_path_factory.mktemp("dev") / "state.json") as server:
        yield server


def next_of(dev, counter):
    return dev.get(f"/admin/counters/{counter}").json()["next"]


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
