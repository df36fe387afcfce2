"""An ASGI app (Starlette) that hands out order IDs from an AsyncSequence
opened in its lifespan: one sequence per worker process, shared by every
request, closed (and its unused IDs counted) when the app stops.

Starlette and uvicorn are pinned in requirements/dev.txt, so `make venv`
installs them in .venv; elsewhere: pip install "./client[async]"
starlette==1.10.0 uvicorn==0.54.0. With `make dev` running:

    source .venv/bin/activate
    IDBLOCKS_URL=http://127.0.0.1:3000 uvicorn --factory examples.asgi_ids:app_from_environment

    curl -X POST localhost:8000/orders             -> {"order_id": ...}
    curl -X POST 'localhost:8000/orders/lines?count=3' -> {"line_ids": [..., ..., ...]}

(the IDs go on from wherever the counter "orders" is).

The sequence drains on SIGUSR1 (docs/shutdown.md): a Kubernetes preStop
hook `kill -USR1 1 && sleep 10` makes the blocks it takes while the pod is
taken out of service half a second's worth, so that little is left unused
when it stops.

A web request waits for an ID at most WAIT_TIMEOUT seconds (the client's
default, 60 s, suits a batch job, not a person waiting for a page); when the
ID service cannot hand one out in time the answer is a 503 that says so and
names the service, with Retry-After. FastAPI takes the same lifespan function.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from idblocks import AsyncSequence, RetryPolicy, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend

MAX_LINES = 100
# Seconds a request waits for an ID, and one block request may take with its
# retries: a person is waiting, so fail soon and say why.
WAIT_TIMEOUT = 5.0
RETRY = RetryPolicy(deadline=3.0)


def create_app(endpoint: str, counter: str = "orders", **sequence_options: Any) -> Starlette:
    sequence_options.setdefault("wait_timeout", WAIT_TIMEOUT)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        backend = AsyncHttpBackend(endpoint, retry=RETRY)
        async with AsyncSequence(backend, counter, **sequence_options) as ids:
            await ids.start()  # the first block is on its way before the first request
            app.state.ids = ids
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGUSR1, ids.drain)  # the preStop hook's signal
            try:
                yield
            finally:
                loop.remove_signal_handler(signal.SIGUSR1)
        await backend.aclose()

    async def new_order(request: Request) -> JSONResponse:
        return JSONResponse({"order_id": await request.app.state.ids.next_id()}, status_code=201)

    async def new_lines(request: Request) -> JSONResponse:
        count = request.query_params.get("count", "1")
        if not count.isdigit() or not 1 <= int(count) <= MAX_LINES:
            return JSONResponse({"error": f"count must be an integer from 1 to {MAX_LINES}"}, status_code=400)
        ids = await request.app.state.ids.take(int(count))
        return JSONResponse({"line_ids": list(ids)}, status_code=201)

    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        # The ID service is down, unreachable or too busy: say which, and when to retry.
        why = f"{exc}: {exc.__cause__}" if exc.__cause__ else str(exc)
        body = {"error": f"no ID from the ID service at {endpoint}: {why}; retry later"}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})

    return Starlette(
        routes=[
            Route("/orders", new_order, methods=["POST"]),
            Route("/orders/lines", new_lines, methods=["POST"]),
        ],
        lifespan=lifespan,
        exception_handlers={ServiceUnavailable: unavailable},
    )


def app_from_environment() -> Starlette:
    endpoint = os.environ.get("IDBLOCKS_URL")
    if not endpoint:
        raise SystemExit("set IDBLOCKS_URL to the idblocks API's URL (make dev serves http://127.0.0.1:3000)")
    return create_app(endpoint)
