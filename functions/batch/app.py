"""POST /counters/{name}/batch: hand out a block of IDs, [start, end]."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from idblocks_core import http
from idblocks_core.observability import logger, metrics, tracer
from idblocks_core.schemas import BatchRequest, BatchResult

app = http.new_resolver()


@app.post(
    "/counters/<name>/batch",
    summary="Hand out a block of consecutive IDs",
    responses=http.documented(200, BatchResult, "invalid_count", *http.BODY_ERRORS, *http.ALLOCATION_ERRORS),
    security=http.CLIENT_SECURITY,
)
def batch(
    name: http.CounterName, request: BatchRequest, idempotency_key: http.IdempotencyKey = None
) -> Response[BatchResult]:
    block = http.allocate(app, "batch", name, request.count, idempotency_key)
    return http.json_response(
        200, BatchResult(counter=name, start=block.start, end=block.end, count=block.count)
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return http.resolve(app, event, context)
