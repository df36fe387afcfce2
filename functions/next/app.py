"""POST|GET /counters/{name}/next: hand out one ID."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from idblocks_core.api import resolver as http
from idblocks_core.api.schemas import NextResult
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import logger, metrics, tracer

app = http.new_resolver()


class GetNotAllowed(Exception):
    """GET next is turned off (AllowGetNext=false)."""


# An exception, not a returned response: the route's responses are validated
# against NextResult.
@app.exception_handler(GetNotAllowed)
def _get_not_allowed(_: GetNotAllowed) -> Response:
    return http.error_response(
        405, "method_not_allowed", "GET does not hand out IDs on this deployment; use POST", {"Allow": "POST"}
    )


# GET too, so a browser or curl without -X can take an ID; never cached. Each
# GET burns an ID, and prefetchers, link previewers and crawlers follow GETs:
# the AllowGetNext parameter (ALLOW_GET_NEXT) turns GET off.
@app.route(
    "/counters/<name>/next",
    method=["POST", "GET"],
    summary="Hand out the next ID of a counter",
    responses=http.documented(200, NextResult, *http.ALLOCATION_ERRORS),
    security=http.CLIENT_SECURITY,
)
def next_id(name: http.CounterName, idempotency_key: http.IdempotencyKey = None) -> Response[NextResult]:
    if app.current_event.http_method == "GET" and not core().settings.allow_get_next:
        raise GetNotAllowed
    block = core().allocator.hand_out(
        name, 1, route="next", caller=http.caller_of(app), key=idempotency_key, invocation=app.lambda_context
    )
    return http.json_response(200, NextResult(counter=name, id=block.start))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    with invocation_deadline(context):
        return http.resolve(app, event, context)
