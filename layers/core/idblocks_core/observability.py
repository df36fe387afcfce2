"""Logger, Tracer and Metrics, created once and shared by every handler.
Service name, namespace and log level come from the POWERTOOLS_* variables
that template.yaml sets in Globals; POWERTOOLS_TRACE_DISABLED (the Tracing
parameter) turns tracing off."""

import os
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.shared.functions import strtobool

logger = Logger()
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
