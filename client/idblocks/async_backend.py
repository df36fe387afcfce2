"""AsyncHttpBackend: the idblocks API's block route for AsyncSequence, on httpx.

    pip install "idblocks[async]"

It is HttpBackend's request, driven on the event loop: the same
``exchange()`` decides what is retried (throttling, 502-504, network errors,
a 500 to a keyed request), with which Idempotency-Key, how long to wait
(RetryPolicy, Retry-After) and which error a caller hears; only sending and
waiting differ (httpx and asyncio.sleep instead of urllib3 and time.sleep).

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
from typing import Any

import httpx

from idblocks.backend import (
    ApiKeyAuth,
    Attempt,
    Auth,
    Block,
    NoAuth,
    NoReply,
    Reply,
    batch_path,
    block_of,
    cannot_connect,
    endpoint_of,
    exchange,
    new_key,
)
from idblocks.retry import RetryPolicy

# Auths whose headers are computed in place, without I/O: anything else signs
# in a worker thread.
_CHEAP_AUTHS = (NoAuth, ApiKeyAuth)


class AsyncHttpBackend:
    def __init__(
        self,
        endpoint: str,
        *,
        auth: Auth | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        pool_size: int = 10,
    ) -> None:
        """As HttpBackend. No connection is opened here: the client is made
        on first use, in the running loop (and again in another loop, or in
        a forked child, whose connections must be its own)."""
        self.endpoint = endpoint_of(endpoint)
        self.auth = auth or NoAuth()
        prepare = getattr(self.auth, "prepare", None)
        if prepare is not None:
            prepare(self.endpoint)
        self.retry = retry or RetryPolicy()
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        self._limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)
        self._client: httpx.AsyncClient | None = None
        self._owner: tuple[int, asyncio.AbstractEventLoop] | None = None

    def _http(self) -> httpx.AsyncClient:
        owner = (os.getpid(), asyncio.get_running_loop())
        if self._client is None or self._owner != owner:
            # A client's connections belong to one loop and one process; the
            # old one is dropped, not closed: its loop (or its process) is
            # the one to close it.
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=self._limits)
            self._owner = owner
        return self._client

    async def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> Block:
        """POST /counters/{counter}/batch. Safe to call again with the same key."""
        path = batch_path(counter)
        body, refusals = await self._send("POST", path, {"count": count}, idempotency_key or new_key())
        return block_of(body, path, refusals)

    async def _send(self, method: str, path: str, body: Any, idempotency_key: str) -> tuple[Any, int]:
        steps = exchange(self.endpoint, self.retry, method, path, body, idempotency_key, True)
        outcome: Reply | NoReply | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                sent: tuple[Any, int] = done.value  # exchange's return; StopIteration.value is untyped
                return sent
            if isinstance(step, Attempt):
                outcome = await self._attempt(step)
            else:
                await asyncio.sleep(step)
                outcome = None

    async def _attempt(self, attempt: Attempt) -> Reply | NoReply:
        if isinstance(self.auth, _CHEAP_AUTHS):
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
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            return NoReply(cannot_connect(self.endpoint, exc), exc, sent=False)
        except httpx.TransportError as exc:
            return NoReply(f"{type(exc).__name__} talking to {self.endpoint}: {exc}", exc, sent=True)
        return Reply(response.status_code, response.content, response.headers.get("Retry-After"))

    async def aclose(self) -> None:
        if self._client is not None and self._owner == (os.getpid(), asyncio.get_running_loop()):
            await self._client.aclose()
        self._client = None
