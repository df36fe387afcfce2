"""AsyncHttpBackend: the idblocks API for asyncio, on httpx.

    pip install "idblocks[async]"

    backend = AsyncHttpBackend("http://127.0.0.1:3000")
    block = await backend.allocate("orders", 100)
    await backend.create("invoices", start=1000)

Every operation is HttpBackend's (idblocks.operations), and each request's
attempts are the same exchange (idblocks.exchange): what is retried
(throttling, 502-504, network errors, a 500 to a keyed request), with which
Idempotency-Key, how long to wait (RetryPolicy, Retry-After) and which error
a caller hears. Only sending and waiting differ: httpx and asyncio.sleep
instead of urllib3 and time.sleep.

httpx, rather than aiohttp: a block request is one small POST per block, so
the HTTP library's speed does not show (the bench measures next_id, not the
network); httpx has explicit connect/read timeouts, needs no compiled wheel,
and brings fewer packages (anyio, idna and certifi are already in most
environments that run Starlette or FastAPI, whose test client is httpx).

Signing never runs on the loop: SigV4 (IamAuth) signs in a worker thread,
where botocore may look for credentials (files, or an instance role's
metadata service, which can take seconds); pass ``IamAuth(lazy=True)`` so that
it does not look when it is made, either. API keys are added in place.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import httpx

from idblocks import snapstart
from idblocks.auth import IN_PLACE
from idblocks.block import Block
from idblocks.exchange import Attempt, Call, NoReply, Reply, cannot_connect, exchange
from idblocks.operations import Operations

T = TypeVar("T")


class AsyncHttpBackend(
    Operations[Awaitable[Block], Awaitable[int], Awaitable[dict[str, Any]], Awaitable[None]]
):
    """``AsyncHttpBackend(endpoint, *, auth=None, timeout=10.0, retry=None, pool_size=10)``:
    HttpBackend for asyncio, with the same operations and arguments, each
    answering an awaitable. No connection is opened when it is made: the
    client is made on first use, in the running loop (and again in another
    loop, in a forked child, or after a restore from a snapshot, whose
    connections must be its own)."""

    def _open(self) -> None:
        self._timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 5.0))
        self._limits = httpx.Limits(max_connections=self.pool_size, max_keepalive_connections=self.pool_size)
        self._client: httpx.AsyncClient | None = None
        self._owner: tuple[int, asyncio.AbstractEventLoop] | None = None
        _live.add(self)

    def _after_fork_in_child(self) -> None:
        # The client's connections, and the retry jitter's generator, are the
        # original process's (and every other copy's): a client of its own is
        # made at the next request, and the generator reseeded. The client is
        # dropped, not closed: closing it takes its loop.
        self._client = None
        self.retry.rng.seed()

    def _http(self) -> httpx.AsyncClient:
        owner = (os.getpid(), asyncio.get_running_loop())
        if self._client is None or self._owner != owner:
            # A client's connections belong to one loop and one process; the
            # old one is dropped, not closed: its loop (or its process) is
            # the one to close it.
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=self._limits)
            self._owner = owner
        return self._client

    async def _perform(self, call: Call[T]) -> T:
        steps = exchange(self.endpoint, self.retry, call, self.contact)
        outcome: Reply | NoReply | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return cast(T, done.value)  # what exchange() returned
            if isinstance(step, Attempt):
                outcome = await self._attempt(step)
            else:
                await asyncio.sleep(step)
                outcome = None

    async def _attempt(self, attempt: Attempt) -> Reply | NoReply:
        if isinstance(self.auth, IN_PLACE):
            signature = self.auth.headers(attempt.method, attempt.url, attempt.data)
        else:
            signature = await asyncio.to_thread(self.auth.headers, attempt.method, attempt.url, attempt.data)
        try:
            response = await self._http().request(
                attempt.method,
                attempt.url,
                content=attempt.data,
                headers={**attempt.headers, **signature},
                follow_redirects=False,
                extensions={"trace": _RestoreCheck(attempt.begun)},
            )
        except snapstart.RestoredSinceBegun as exc:
            return NoReply(str(exc), exc, sent=False)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            return NoReply(cannot_connect(self.endpoint, exc), exc, sent=False)
        except httpx.TransportError as exc:
            return NoReply(f"{type(exc).__name__} talking to {self.endpoint}: {exc}", exc, sent=True)
        return Reply(response.status_code, response.content, response.headers.get("Retry-After"))

    async def aclose(self) -> None:
        """Close this loop's connections (a later request opens new ones)."""
        if self._client is not None and self._owner == (os.getpid(), asyncio.get_running_loop()):
            await self._client.aclose()
        self._client = None


class _RestoreCheck:
    """httpcore's ``trace`` extension for one attempt: when the request's
    headers are about to be written (the connection taken from the pool or
    made, its name resolved), no restore from a snapshot may have come since
    the request began. Every wait of the attempt (signing, the pool, name
    resolution in a worker thread, connecting) is behind it; between it and
    the write, the transport awaits only if the task is being cancelled or
    the connection's send buffer is full, and a request's first write finds
    it empty."""

    def __init__(self, begun: int) -> None:
        self.begun = begun

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith(".send_request_headers.started"):  # http11. or http2.
            snapstart.check_not_restored_since(self.begun)


# Every AsyncHttpBackend in the process, so that a copy of it (a forked
# child, a restored snapshot) starts each one afresh.
_live: weakref.WeakSet[AsyncHttpBackend] = weakref.WeakSet()


@snapstart.on_restore
def _after_fork_in_child() -> None:
    for backend in list(_live):
        backend._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
