"""POST|GET /counters/{name}/next: hand out one ID."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from idblocks_core import http
from idblocks_core.observability import logger, metrics, tracer
from idblocks_core.schemas import NextResult

app = http.new_resolver()


# GET too, so a browser or curl without -X can take an ID; never cached.
@app.route(
    "/counters/<name>/next",
    method=["POST", "GET"],
    summary="Hand out the next ID of a counter",
    responses=http.documented(200, NextResult, *http.ALLOCATION_ERRORS),
    security=http.CLIENT_SECURITY,
)
def next_id(name: http.CounterName, idempotency_key: http.IdempotencyKey = None) -> Response[NextResult]:
    block = http.allocate(app, "next", name, 1, idempotency_key)
    return http.json_response(200, NextResult(counter=name, id=block.start))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return http.resolve(app, event, context)
