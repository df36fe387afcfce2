"""POST /counters/{name}/batch: hand out a block of IDs, [start, end]."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from idblocks_core.api import resolver as http
from idblocks_core.api.schemas import BatchRequest, BatchResult
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import logger, metrics, tracer

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
    block = core().allocator.hand_out(
        name,
        request.count,
        route="batch",
        caller=http.caller_of(app),
        key=idempotency_key,
        invocation=app.lambda_context,
    )
    return http.json_response(
        200,
        BatchResult(counter=name, start=block.start, end=block.end, count=block.count, step=block.step),
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    with invocation_deadline(context):
        return http.resolve(app, event, context)
