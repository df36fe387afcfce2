"""An ASGI app (Starlette) that hands out order IDs from an AsyncSequence
opened in its lifespan: one sequence per worker process, shared by every
request, closed (and its unused IDs counted) when the app stops.

    IDBLOCKS_URL=http://127.0.0.1:3000 uvicorn --factory examples.asgi_ids:app_from_environment

    curl -X POST localhost:8000/orders             -> {"order_id": 1}
    curl -X POST 'localhost:8000/orders/lines?count=3' -> {"line_ids": [2, 3, 4]}

FastAPI takes the same lifespan function.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from idblocks import AsyncSequence, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend

MAX_LINES = 100


def create_app(endpoint: str, counter: str = "orders", **sequence_options: Any) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        backend = AsyncHttpBackend(endpoint)
        async with AsyncSequence(backend, counter, **sequence_options) as ids:
            await ids.start()  # the first block is on its way before the first request
            app.state.ids = ids
            yield
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
        # The ID service is down (or the counter too busy): the caller may retry.
        body = {"error": "IDs are unavailable, retry"}
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
