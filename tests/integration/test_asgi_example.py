"""The ASGI example (examples/asgi_ids.py) against the dev server: its
lifespan opens an AsyncSequence, requests running at once share it, and its
shutdown counts what was left."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from devserver.process import DevServer
from examples.asgi_ids import create_app


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    with DevServer("--fresh", state_file=tmp_path_factory.mktemp("dev") / "state.json") as server:
        yield server


@contextlib.asynccontextmanager
async def served(app):
    """The app started and stopped as an ASGI server does (the lifespan
    protocol): startup before the first request, shutdown after the last."""
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
    running = asyncio.create_task(app(scope, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        assert (await outbox.get())["type"] == "lifespan.shutdown.complete"
        await running


def next_of(dev, counter):
    return dev.get(f"/admin/counters/{counter}").json()["next"]


def test_concurrent_requests_get_unique_ids_and_shutdown_counts_the_rest(dev):
    app = create_app(dev.url, "asgi-orders", initial_block=10)

    async def main():
        async with served(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                orders = await asyncio.gather(*(client.post("/orders") for _ in range(300)))
                lines = await asyncio.gather(*(client.post("/orders/lines?count=7") for _ in range(20)))
                bad = await client.post("/orders/lines?count=1000")
        return orders, lines, bad, app.state.ids.unused_ids

    orders, lines, bad, unused = asyncio.run(main())
    assert {r.status_code for r in [*orders, *lines]} == {201}
    assert bad.status_code == 400
    ids = [r.json()["order_id"] for r in orders]
    line_ids = [i for r in lines for i in r.json()["line_ids"]]
    every = ids + line_ids
    assert len(every) == len(set(every))
    for response in lines:  # consecutive, as take() hands them out
        run = response.json()["line_ids"]
        assert run == list(range(run[0], run[0] + 7))
    # the service handed out exactly what the app used plus what it counted unused
    assert next_of(dev, "asgi-orders") - 1 == len(every) + unused
