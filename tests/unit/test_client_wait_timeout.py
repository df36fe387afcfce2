"""wait_timeout bounds a call's wait for a block, whoever sends the request
and however long the backend's retries take (up to RetryPolicy.deadline, 30 s
by default): a Lambda function keeps wait_timeout below its Timeout so that a
caller is told ServiceUnavailable rather than timed out. The request a
caller gave up on goes on; the block it brings is held for the next caller,
never lost without a count nor handed out twice. The Node client's waits:
client-node/test/unit/waiting.test.ts."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from idblocks import AsyncSequence, HttpBackend, Sequence, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend
from idblocks.block import Block
from idblocks.testing import MemoryBackend
from tests.support.loopback import LoopbackServer, QuietHandler
from tests.support.waiting import wait_until

WAIT = 0.5
# Past the wait: a caller ends by wait_timeout and this margin. Generous, so
# that a loaded machine does not fail it; a request left to its retries
# takes 30 s (the backend's deadline).
MARGIN = 4.0


@contextmanager
def silent_server() -> Iterator[str]:
    """A server that takes every connection (its listening backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"


class FallsSilent(LoopbackServer):
    """Answers the first block request, then takes every other one and never
    answers it (until the test ends): a service that stopped answering."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.requests = 0
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests += 1
                if server.requests > 1:
                    server.done.wait(60)
                    self.drop()
                    return
                self.send_json(200, b'{"counter": "orders", "start": 1, "end": 10, "count": 10}')

        self._serve(Handler)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        super().__exit__(*exc)


NO_BLOCK = f"no block for 'orders' within {WAIT} s"


def waited(call) -> float:
    """Seconds ``call()`` took to raise ServiceUnavailable for want of a block."""
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable, match=NO_BLOCK):
        call()
    return time.monotonic() - started


async def waited_on_the_loop(seq: AsyncSequence) -> float:
    """Seconds ``await seq.next_id()`` took to raise ServiceUnavailable for
    want of a block; then the sequence is closed."""
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable, match=NO_BLOCK):
        await seq.next_id()
    took = time.monotonic() - started
    await seq.aclose(timeout=0)
    return took


# -- threads ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [False, True], ids=["prefetch=False", "prefetch"])
def test_a_thread_waits_no_longer_than_wait_timeout_for_a_service_that_never_answers(prefetch):
    """Given a Sequence over a service that takes the connection and never
    answers, when a thread asks for an ID (its own request: nothing is held),
    then it hears ServiceUnavailable by wait_timeout, not after the backend's
    30 s of retries. (Reproduces: 30.1 s with wait_timeout=1.)"""
    with silent_server() as url:
        seq = Sequence(HttpBackend(url), "orders", wait_timeout=WAIT, prefetch=prefetch)
        took = waited(seq.next_id)
        seq.close(timeout=0)
    assert WAIT <= took < WAIT + MARGIN


def test_a_thread_waiting_on_the_prefetch_waits_no_longer_than_wait_timeout():
    """Given a Sequence whose prefetch went to a service that stopped
    answering, when a thread has drawn every ID held, then it hears
    ServiceUnavailable by wait_timeout."""
    with FallsSilent() as server:
        seq = Sequence(HttpBackend(server.url), "orders", block_size=10, wait_timeout=WAIT)
        assert [seq.next_id() for _ in range(10)] == list(range(1, 11))
        assert wait_until(lambda: server.requests == 2)  # the prefetch is out
        took = waited(seq.next_id)
        seq.close(timeout=0)
    assert WAIT <= took < WAIT + MARGIN


class Gated(MemoryBackend):
    """Each block request is held until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        assert self.gate.wait(30), "the test never opened the gate"
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def test_the_block_of_a_request_its_caller_gave_up_on_is_held_for_the_next_caller():
    """Given a caller that gave up on its request at wait_timeout, when the
    request is answered after all, then its block is held: the next caller
    is served from it without another request, and close counts the rest."""
    backend = Gated()
    seq = Sequence(backend, "orders", block_size=10, prefetch=False, wait_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable, match=r"within 0\.2 s"):
        seq.next_id()
    assert time.monotonic() - started < 0.2 + MARGIN
    backend.gate.set()
    assert wait_until(lambda: seq.requests == 1)  # answered, and settled
    assert [seq.next_id() for _ in range(3)] == [1, 2, 3]
    assert backend.calls == 1
    assert seq.close() == 7


# -- asyncio -----------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [False, True], ids=["prefetch=False", "prefetch"])
def test_a_task_waits_no_longer_than_wait_timeout_for_a_service_that_never_answers(prefetch):
    """As for threads: the block request runs in the AsyncSequence's own task,
    and the caller waits no longer than wait_timeout."""

    async def main(url: str) -> float:
        seq = AsyncSequence(AsyncHttpBackend(url), "orders", wait_timeout=WAIT, prefetch=prefetch)
        return await waited_on_the_loop(seq)

    with silent_server() as url:
        took = asyncio.run(main(url))
    assert WAIT <= took < WAIT + MARGIN


def test_a_task_waiting_on_the_prefetch_waits_no_longer_than_wait_timeout():
    async def main(url: str, server: FallsSilent) -> float:
        seq = AsyncSequence(AsyncHttpBackend(url), "orders", block_size=10, wait_timeout=WAIT)
        assert [await seq.next_id() for _ in range(10)] == list(range(1, 11))
        for _ in range(10_000):  # 10 s at most
            if server.requests == 2:  # the prefetch is out
                break
            await asyncio.sleep(0.001)
        return await waited_on_the_loop(seq)

    with FallsSilent() as server:
        took = asyncio.run(main(server.url, server))
    assert WAIT <= took < WAIT + MARGIN
