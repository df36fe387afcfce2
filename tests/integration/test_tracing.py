"""Tracing off and on: each in a fresh interpreter, because the tracer is
chosen once, when the handler module is imported (as in a Lambda container)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports the next function's handler, serves one request with DynamoDB
# stubbed, and reports what tracing loaded and patched.
CHILD = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import app
from botocore.stub import Stubber
from idblocks_core.core import core
from idblocks_core.observability import tracer
from localrun.invoke import LocalContext

stubber = Stubber(core().store.client)
stubber.add_response("update_item", {"Attributes": {"hwm": {"N": "141"}}})
stubber.activate()
with open(sys.argv[3]) as file:
    event = json.load(file)
reply = app.lambda_handler(event, LocalContext("tracing-test", timeout_seconds=15))
patched = None
if "aws_xray_sdk.core.patcher" in sys.modules:
    patched = sorted(sys.modules["aws_xray_sdk.core.patcher"]._PATCHED_MODULES)
print(json.dumps({
    "status": reply["statusCode"],
    "body": json.loads(reply["body"]),
    "xray_sdk_loaded": "aws_xray_sdk" in sys.modules,
    "patched": patched,
    "tracer": type(tracer).__name__,
}))
"""


def run_next_handler(trace_disabled: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_TRACE")}
    env |= {
        "POWERTOOLS_TRACE_DISABLED": trace_disabled,
        # Powertools traces only inside Lambda; segments go by UDP to a port where nothing listens.
        "AWS_LAMBDA_FUNCTION_NAME": "tracing-test",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / "next"),
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "functions" / "next"), str(ROOT / "layers" / "core"),
         str(ROOT / "events" / "next-post.json")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tracing_off_never_loads_the_xray_sdk():
    """With POWERTOOLS_TRACE_DISABLED=true the handler serves a request
    without importing the X-Ray SDK at all (Powertools' disabled Tracer
    imported it, and patched every library it knows, on every cold start)."""
    result = run_next_handler("true")
    assert result["status"] == 200
    assert result["body"]["id"] == 141
    assert result["xray_sdk_loaded"] is False
    assert result["tracer"] == "UntracedHandler"


def test_tracing_on_patches_only_botocore():
    """Tracing on (the deployed default): Powertools' Tracer wraps the
    handler and the X-Ray SDK patches botocore, and only botocore: patching
    requests, sqlite3, httplib and the rest cost cold-start time for calls
    these functions never make."""
    result = run_next_handler("false")
    assert result["status"] == 200
    assert result["body"]["id"] == 141
    assert result["tracer"] == "Tracer"
    assert result["patched"] == ["botocore"]
