"""POST /counters/{name}/batch: hand out a block of IDs, [start, end]."""

from typing import Any

from idblocks_core.api import gateway as http
from idblocks_core.api.fields import COUNT, IDEMPOTENCY_KEY, NAME
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import lambda_entry

routes = http.Routes()


@routes.route(
    "POST",
    "/counters/{name}/batch",
    tag="ids",
    summary="Hand out a block of consecutive IDs",
    fields=(NAME, IDEMPOTENCY_KEY, COUNT),
    body="BatchRequest",
    answers=(200, "BatchResult", *http.ALLOCATION_ERRORS),
    security=http.CLIENT_SECURITY,
)
def batch(request: http.Request) -> dict[str, Any]:
    name = request["name"]
    block = core().allocator.hand_out(
        name,
        request["count"],
        route="batch",
        caller=request.caller,
        key=request["idempotency-key"],
        invocation=request.context,
    )
    return http.json_response(
        200,
        {"counter": name, "start": block.start, "end": block.end, "count": block.count, "step": block.step},
    )


@lambda_entry(flushes_metrics=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    with invocation_deadline(context):
        return http.resolve(routes, event, context)
