"""POST|GET /counters/{name}/next: hand out one ID."""

from typing import Any

from idblocks_core.api import gateway as http
from idblocks_core.api.fields import IDEMPOTENCY_KEY, NAME
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import lambda_entry

routes = http.Routes()
# No body, an empty one or {}: any field is refused.
DECLARED = {"fields": (NAME, IDEMPOTENCY_KEY), "security": http.CLIENT_SECURITY, "tag": "ids"}
ANSWERS = (200, "NextResult", *http.ALLOCATION_ERRORS)


# GET too, so a browser or curl without -X can take an ID; never cached. Each
# GET burns an ID, and prefetchers, link previewers and crawlers follow GETs:
# the AllowGetNext parameter (ALLOW_GET_NEXT) turns GET off.
@routes.route(
    "GET",
    "/counters/{name}/next",
    operation_id="next_id_get",
    summary="Hand out the next ID of a counter, by GET (for browsers and curl; programs use POST)",
    answers=(*ANSWERS, "method_not_allowed"),
    **DECLARED,
)
@routes.route(
    "POST",
    "/counters/{name}/next",
    summary="Hand out the next ID of a counter",
    answers=ANSWERS,
    **DECLARED,
)
def next_id(request: http.Request) -> dict[str, Any]:
    if request.method == "GET" and not core().settings.allow_get_next:
        return http.error_response(
            405,
            "method_not_allowed",
            "GET does not hand out IDs on this deployment; use POST",
            {"Allow": "POST"},
        )
    name = request["name"]
    block = core().allocator.hand_out(
        name,
        1,
        route="next",
        caller=request.caller,
        key=request["idempotency-key"],
        invocation=request.context,
    )
    return http.json_response(200, {"counter": name, "id": block.start})


@lambda_entry(flushes_metrics=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    with invocation_deadline(context):
        return http.resolve(routes, event, context)
