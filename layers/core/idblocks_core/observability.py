"""Logger, Tracer and Metrics, created once and shared by every handler.
Service name, namespace and log level come from the POWERTOOLS_* variables
that template.yaml sets in Globals; POWERTOOLS_TRACE_DISABLED (the Tracing
parameter) turns tracing off."""

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.shared.functions import strtobool


def _message_as_written(message: str) -> str:
    """The Logger's reading of a message: as written. Its default tries each
    message as JSON first, and every message these functions log is plain
    text (values go in as keys), so each line paid for a failed parse."""
    return message


# Ignored arg-type: Powertools calls the deserializer only with str messages
# (its formatter checks isinstance first), yet annotates a wider parameter.
logger = Logger(json_deserializer=_message_as_written)  # type: ignore[arg-type]
metrics = Metrics()


class UntracedHandler:
    """What the handlers need of a Tracer when tracing is off.

    Powertools' own Tracer, even disabled, imports the X-Ray SDK at creation:
    about 20 ms of every cold start for segments that are never sent."""

    def capture_lambda_handler(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        return handler


def tracing_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Powertools' reading of POWERTOOLS_TRACE_DISABLED: a bad value fails the
    cold start loudly rather than silently picking one."""
    return not strtobool(environ.get("POWERTOOLS_TRACE_DISABLED", "false"))


def new_tracer() -> Any:
    if not tracing_enabled():
        return UntracedHandler()
    from aws_lambda_powertools import Tracer

    # Only DynamoDB calls (botocore) make subsegments; patching every library
    # the X-Ray SDK knows (requests, sqlite3, httplib ...) doubled the
    # tracer's share of the cold start for calls these functions never make.
    return Tracer(patch_modules=("botocore",))


tracer = new_tracer()


Handler = Callable[[Any, Any], Any]


def _api_request_id(event: Any) -> str | None:
    context = event.get("requestContext") if isinstance(event, dict) else None
    return context.get("requestId") if isinstance(context, dict) else None


def lambda_entry(*, flushes_metrics: bool) -> Callable[[Handler], Handler]:
    """What each function wraps its handler in: the Logger's Lambda context
    keys, API Gateway's request id as the correlation id of every line, the
    handler's trace subsegment and, for the functions that count, the metrics
    flushed at the end. The request id is read directly rather than through
    the Logger's JMESPath correlation path, which cost a warm request about
    as much as all of the use case's own code."""

    def wrap(handler: Handler) -> Handler:
        traced = tracer.capture_lambda_handler(metrics.log_metrics(handler) if flushes_metrics else handler)

        @functools.wraps(handler)
        def with_correlation_id(event: Any, context: Any) -> Any:
            logger.set_correlation_id(_api_request_id(event))
            return traced(event, context)

        return logger.inject_lambda_context(with_correlation_id)

    return wrap
