"""The ASGI example (examples/asgi_ids.py) against the dev server: its
lifespan opens an AsyncSequence, requests running at once share it, and its
shutdown counts what was left."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from examples import asgi_ids
from examples.asgi_ids import WAIT_TIMEOUT, create_app
from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.ledger import next_of


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


def test_concurrent_requests_get_unique_ids_and_shutdown_counts_the_rest(dev):
    # A crowd of 300 on a busy machine may wait longer than a web request should.
    app = create_app(dev.url, "asgi-orders", initial_block=10, wait_timeout=60)

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


def test_the_example_runs_as_its_docstring_says(dev):
    """The command in the docstring, with uvicorn from .venv (it was in no
    requirements file): the app serves IDs from the dev server."""
    (command,) = re.findall(r"^\s*(IDBLOCKS_URL=\S+ uvicorn .*)$", asgi_ids.__doc__, re.MULTILINE)
    variable, program, *args = shlex.split(command)
    env = scrubbed_environment() | {"IDBLOCKS_URL": dev.url, "PYTHONUNBUFFERED": "1"}
    assert variable.startswith("IDBLOCKS_URL=")
    uvicorn = Path(sys.executable).parent / program
    server = subprocess.Popen(
        [str(uvicorn), *args, "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in server.stdout:
            found = re.search(r"Uvicorn running on (http://\S+)", line)
            if found:
                break
        assert found, "uvicorn did not start"
        reply = httpx.post(f"{found[1]}/orders", timeout=60)
        assert reply.status_code == 201, reply.text
        assert isinstance(reply.json()["order_id"], int)
        # A preStop hook's kill -USR1 drains it: it serves on
        server.send_signal(signal.SIGUSR1)
        again = httpx.post(f"{found[1]}/orders", timeout=60)
        assert again.status_code == 201, again.text
        assert again.json()["order_id"] > reply.json()["order_id"]
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close()


def test_sigusr1_drains_the_sequence_and_the_app_serves_on_until_shutdown(dev):
    app = create_app(dev.url, "asgi-drain")

    async def main():
        async with served(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                first = await client.post("/orders")
                assert signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)  # or it would stop us
                os.kill(os.getpid(), signal.SIGUSR1)
                await asyncio.sleep(0.1)  # the loop reads the signal
                drained = app.state.ids.draining
                then = await client.post("/orders")
        return first, then, drained

    first, then, drained = asyncio.run(main())
    assert drained
    assert (first.status_code, then.status_code) == (201, 201)
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # the lifespan's shutdown removed its handler


def unavailable_answer(endpoint):
    """The example app in front of ``endpoint``, started, asked for an order:
    its 503's error message, after checking the answer's shape."""
    app = create_app(endpoint, "asgi-unavailable")

    async def main():
        async with served(app):
            assert app.state.ids.wait_timeout == WAIT_TIMEOUT <= 10
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                return await client.post("/orders")

    reply = asyncio.run(main())
    assert reply.status_code == 503
    assert reply.headers["Retry-After"] == "1"
    message = reply.json()["error"]
    assert endpoint in message  # which service
    return message


def test_with_nothing_at_the_id_services_address_a_request_fails_at_once_with_a_503_that_says_why():
    """A request waited the client's default 60 s, right for a batch job, then
    got "IDs are unavailable, retry". Nothing has ever answered at this
    address: the client says so at once, without retries."""
    message = unavailable_answer("http://127.0.0.1:9")  # nothing listens on port 9
    assert "never answered" in message  # why: a wrong address, or a server not started


def test_with_the_id_service_not_answering_a_request_fails_within_its_wait_with_a_503_that_says_why():
    """A service that takes the connection and never answers: the request is
    given WAIT_TIMEOUT, not the client's default 60 s."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (the backlog), never answers
        message = unavailable_answer(f"http://127.0.0.1:{silent.getsockname()[1]}")
    assert f"within {WAIT_TIMEOUT} s" in message  # how long it was given
