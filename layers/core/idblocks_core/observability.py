"""Logger and Metrics, created once and shared by every handler.
Service name, namespace and log level come from the POWERTOOLS_* variables
that template.yaml sets in Globals.

No tracing SDK runs in the functions. With the Tracing parameter Active,
Lambda records each invocation (its initialisation, the invocation, the
overhead) and API Gateway the request, from outside the function's code; the
time a request spends in DynamoDB is a metric and a field of its allocation
record (logic/allocation.py). A span per DynamoDB call comes only with the
OpenTelemetry layer that the OpenTelemetryLayerArn parameter adds, which
wraps the handler from outside (docs/deploy.md, Tracing)."""

import functools
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics


def _message_as_written(message: str) -> str:
    """The Logger's reading of a message: as written. Its default tries each
    message as JSON first, and every message these functions log is plain
    text (values go in as keys), so each line paid for a failed parse."""
    return message


# Ignored arg-type: Powertools calls the deserializer only with str messages
# (its formatter checks isinstance first), yet annotates a wider parameter.
logger = Logger(json_deserializer=_message_as_written)  # type: ignore[arg-type]
metrics = Metrics()


Handler = Callable[[Any, Any], Any]


def _api_request_id(event: Any) -> str | None:
    context = event.get("requestContext") if isinstance(event, dict) else None
    return context.get("requestId") if isinstance(context, dict) else None


def lambda_entry(*, flushes_metrics: bool) -> Callable[[Handler], Handler]:
    """What each function wraps its handler in: the Logger's Lambda context
    keys, API Gateway's request id as the correlation id of every line and,
    for the functions that count, the metrics flushed at the end. The
    request id is read directly rather than through the Logger's JMESPath
    correlation path, which cost a warm request about as much as all of the
    use case's own code."""

    def wrap(handler: Handler) -> Handler:
        counted = metrics.log_metrics(handler) if flushes_metrics else handler

        @functools.wraps(handler)
        def with_correlation_id(event: Any, context: Any) -> Any:
            logger.set_correlation_id(_api_request_id(event))
            return counted(event, context)

        return logger.inject_lambda_context(with_correlation_id)

    return wrap
