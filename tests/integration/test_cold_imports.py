"""What a cold start loads. Each handler is imported in a fresh interpreter,
as Lambda starts one, and serves its first request (DynamoDB stubbed); what
it must not have loaded by then is what made the cold start slow:

- pydantic and Powertools' Event Handler (about 70 ms): API Gateway routes,
  idblocks_core.api.gateway dispatches on what it matched, and the use cases
  check the values; pydantic describes responses for the OpenAPI document at
  development time only (it is not in the layer, but the child can import it
  from the development environment, so a stray import would be seen);
- boto3 (its import and s3transfer's): the client is botocore's own;
- asyncio, which wrapt 2 imported for the X-Ray SDK's patching of botocore
  (about 25 ms with tracing on);
- any tracing SDK: the X-Ray SDK (and wrapt, which it patched botocore
  with) or OpenTelemetry. As deployed, with Tracing Active, AWS traces the
  functions from outside; only the OpenTelemetry layer, when a stack asks
  for it, brings a tracer, and it wraps the handler from outside too.

A regression would not fail any behaviour test, only cost every cold start,
so it is pinned here. The child runs with the functions' environment as the
template's defaults set it, and the trace header Lambda gives a sampled
invocation."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig

import pytest

from localrun.tables import TABLE_NAMES
from localrun.template import ROOT, default_template

NOT_ON_THE_REQUEST_PATH = (
    "pydantic",
    "pydantic_core",
    "aws_lambda_powertools.event_handler",
    "boto3",
    "asyncio",
    "aws_xray_sdk",
    "wrapt",
    "opentelemetry",
)
EVENTS = {"next": "next-post", "batch": "batch", "admin": "admin-get"}

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import app
from bench.lambda_child import context, stub
from idblocks_core.core import core

stub(core().store.client, 1, sys.argv[2])
with open(sys.argv[3]) as file:
    reply = app.lambda_handler(json.load(file), context())
print(json.dumps({"status": reply["statusCode"], "modules": sorted(sys.modules)}))
"""


def cold_start(route: str) -> dict:
    env = default_template().environment("NextFunction", TABLE_NAMES) | {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "cold",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / route),
        # what Lambda sets for a traced invocation, sampled
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        # -S leaves site-packages out (and their .pth files, which import
        # what Lambda would not); the layer's packages are taken from it.
        "PYTHONPATH": f"{ROOT}:{ROOT / 'layers' / 'core'}:{sysconfig.get_paths()['purelib']}",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            CHILD,
            str(ROOT / "functions" / route),
            route,
            str(ROOT / "events" / f"{EVENTS[route]}.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT / "functions" / route,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("route", ["next", "batch", "admin"])
def test_a_cold_start_loads_neither_pydantic_nor_the_event_handler_nor_boto3_nor_a_tracer(route):
    """Import the handler and serve one request, as deployed: none of the
    slow imports is loaded, and no tracing SDK."""
    seen = cold_start(route)
    assert seen["status"] == 200
    loaded = [
        name
        for name in seen["modules"]
        if any(name == banned or name.startswith(banned + ".") for banned in NOT_ON_THE_REQUEST_PATH)
    ]
    assert loaded == []
    # the check sees what it should: the handler's own stack was loaded
    assert "idblocks_core.api.gateway" in seen["modules"]
