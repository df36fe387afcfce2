"""Server-side cost: cold start and warm overhead of each function, and the
size of what is deployed. Needs `sam build` output (make bench builds first).

    python -m bench server

Cold start: a fresh interpreter imports the handler and serves its first
request, against the same interpreter doing only `import boto3` and creating
a DynamoDB client, in alternating rounds of one run. Each route reports the
median of its cold starts, the median of its own baseline rounds, and the
ratio of those two figures, so the ratio follows from the figures beside it.
Both load boto3 from the layer, as Lambda would, with the function's
environment from template.yaml and Lambda's own variables; DynamoDB is a
botocore Stubber (no network). Tracing is on, as deployed, with a trace
header; its segments go by UDP to 127.0.0.1:2000, where no daemon listens.
The built layer is for arm64; it is measured here as the same pinned
requirements installed for this machine (bench/.cache), with the same
idblocks_core.

Where the next function's cold start goes is measured in rounds interleaved
with its cold starts: the steps of the round with the median total, which
add up to that total (what runs between two marks, e.g. building the stub,
counts in the step it precedes).

Warm overhead: one interpreter, the handler already loaded, invoked many
times with DynamoDB stubbed; the median time per invocation is all handler.

Writes bench/results/server.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from io import BytesIO
from pathlib import Path

from bench.common import machine_facts, write_results
from devserver.template import ROOT, default_template

BUILD = ROOT / ".aws-sam" / "build"
ROUNDS = 9
WARM_CALLS = 2000
FUNCTIONS = {"next": "NextFunction", "batch": "BatchFunction", "admin": "AdminFunction"}
EVENTS = {"next": "next-post", "batch": "batch", "admin": "admin-get"}
TABLES = {"CountersTable": "counters", "IdempotencyTable": "idempotency"}

# DynamoDB's answers, for the Stubber: an allocation, or a counter read.
STUB = """
from botocore.stub import Stubber, ANY
item = {"name": {"S": "invoices"}, "hwm": {"N": "41"}, "room": {"N": "9"}, "max_id": {"N": "50"},
        "created_at": {"S": "2026-01-01T00:00:00.000Z"}, "updated_at": {"S": "2026-01-01T00:00:00.000Z"}}
def stub(client, calls, route):
    stubber = Stubber(client)
    for _ in range(calls):
        if route == "admin":
            stubber.add_response("get_item", {"Item": item})
        else:
            stubber.add_response("update_item", {"Attributes": {"hwm": {"N": "141"}}})
    stubber.activate()
    return stubber
"""

# What Lambda passes the handler, as much of it as Powertools reads.
CONTEXT = """
class Context:
    function_name = "bench"; memory_limit_in_mb = 512; aws_request_id = "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    def get_remaining_time_in_millis(self): return 15000
"""

COLD = """
import time
started = time.perf_counter()
import json, sys
sys.path[:0] = [{function_dir!r}, {layer_dir!r}]
import app
from idblocks_core.core import core
{stub}
stub(core().store.client, 1, {route!r})
event = json.load(open({event!r}))
{context}
reply = app.lambda_handler(event, Context())
took = time.perf_counter() - started
assert reply["statusCode"] == 200, reply
print(took)
"""

BASELINE = """
import time
started = time.perf_counter()
import sys
sys.path[:0] = [{layer_dir!r}]
import boto3
boto3.client("dynamodb")
print(time.perf_counter() - started)
"""

WARM = """
import json, statistics, sys, time, io, contextlib
sys.path[:0] = [{function_dir!r}, {layer_dir!r}]
import app
from idblocks_core.core import core
{stub}
stub(core().store.client, {calls} + 1, {route!r})
event = json.load(open({event!r}))
{context}
sink = io.StringIO()
with contextlib.redirect_stdout(sink):  # metrics lines; Lambda ships them, here they are dropped
    app.lambda_handler(event, Context())
    times = []
    for _ in range({calls}):
        started = time.perf_counter()
        reply = app.lambda_handler(event, Context())
        times.append(time.perf_counter() - started)
        assert reply["statusCode"] == 200, reply
        sink.seek(0); sink.truncate()
print(statistics.median(times))
"""


def lambda_environment(function_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_", "PYTHON", "_X_AMZN"))
    }
    env |= default_template().environment("NextFunction", TABLES)
    env |= {
        # what the Lambda runtime sets (the X-Ray SDK, for one, reads LAMBDA_TASK_ROOT)
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "LAMBDA_TASK_ROOT": str(function_dir),
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return env


def run(code: str, cwd: Path) -> float:
    return [float(x) for x in run_lines(code, cwd)[-1].split()][-1]


def run_lines(code: str, cwd: Path) -> list[str]:
    # -S: no site-packages, so only the standard library and the layer are
    # importable, as in Lambda (this environment's extras, such as awscrt or
    # pyOpenSSL, would change what botocore loads).
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        env=lambda_environment(cwd),
        cwd=cwd,
    )
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()


def local_layer() -> Path:
    """The layer's contents for this machine's architecture."""
    requirements = ROOT / "layers" / "core" / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    target = ROOT / "bench" / ".cache" / f"layer-{platform.machine()}-{digest}" / "python"
    if not target.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
             "-r", str(requirements)],
            check=True,
        )  # fmt: skip
    core = target / "idblocks_core"
    shutil.rmtree(core, ignore_errors=True)
    shutil.copytree(BUILD / "CoreLayer" / "python" / "idblocks_core", core)
    # Lambda finds the layer's bytecode cached after the first container;
    # compile once so both sides of the comparison read .pyc files.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(BUILD)], check=True)
    return target


def cold_starts(layer: Path) -> dict[str, float]:
    results: dict[str, float] = {}
    for route, logical_id in FUNCTIONS.items():
        fn = BUILD / logical_id
        fields = {
            "function_dir": str(fn),
            "layer_dir": str(layer),
            "stub": STUB,
            "route": route,
            "event": str(ROOT / "events" / f"{EVENTS[route]}.json"),
            "context": CONTEXT,
        }
        cold, base, steps = [], [], []
        for _ in range(ROUNDS):
            base.append(run(BASELINE.format(layer_dir=str(layer)), fn))
            cold.append(run(COLD.format(**fields), fn))
            if route == "next":
                steps.append(breakdown_round(layer))
        cold_ms, base_ms = statistics.median(cold) * 1000, statistics.median(base) * 1000
        results[f"cold_start_ms_{route}"] = round(cold_ms, 1)
        results[f"cold_start_baseline_ms_{route}"] = round(base_ms, 1)
        results[f"cold_start_ratio_{route}"] = round(cold_ms / base_ms, 3)
        if steps:
            results |= breakdown(steps)
    return results


BREAKDOWN = {
    "boto3_import": "import boto3",
    "powertools_logging_metrics": "import aws_lambda_powertools.logging, aws_lambda_powertools.metrics",
    "tracer": "from aws_lambda_powertools import Tracer; Tracer()",
    "event_handler_pydantic": "import aws_lambda_powertools.event_handler.api_gateway, "
    "aws_lambda_powertools.event_handler.openapi.params",
    "app_import": "import app",
    "client_create": "from idblocks_core.dal.counter_store import new_dynamodb_client; "
    "client = new_dynamodb_client()",
}
STEPS = [*BREAKDOWN, "first_invocation"]


def breakdown_round(layer: Path) -> list[float]:
    """One cold start of the next function, timed step by step: the seconds
    from the start to the end of each step."""
    fn = BUILD / FUNCTIONS["next"]
    steps = "".join(f"{code}\nmarks.append(time.perf_counter())\n" for code in BREAKDOWN.values())
    code = (
        f"import time\nstarted = time.perf_counter()\nmarks = []\nimport json, sys\n"
        f"sys.path[:0] = [{str(fn)!r}, {str(layer)!r}]\n{steps}{STUB}\nstub(client, 1, 'next')\n"
        f"event = json.load(open({str(ROOT / 'events' / 'next-post.json')!r}))\n"
        f"{CONTEXT}"
        "assert app.lambda_handler(event, Context())['statusCode'] == 200\n"
        "marks.append(time.perf_counter())\nprint(*[m - started for m in marks])\n"
    )
    return [float(x) for x in run_lines(code, fn)[-1].split()]


def breakdown(rounds: list[list[float]]) -> dict[str, float]:
    """Where the next function's cold start goes: the steps of the round with
    the median total, so that they add up to a total that was measured."""
    median_round = sorted(rounds, key=lambda marks: marks[-1])[len(rounds) // 2]
    ends = [round(mark * 1000, 1) for mark in median_round]
    # Rounded from the cumulative marks, so the steps add up to the total exactly.
    steps_ms = [round(b - a, 1) for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]
    results = {f"cold_next_ms_{name}": ms for name, ms in zip(STEPS, steps_ms, strict=True)}
    results["cold_next_ms_breakdown_total"] = ends[-1]
    return results


def warm_overheads(layer: Path) -> dict[str, float]:
    results: dict[str, float] = {}
    for route, logical_id in FUNCTIONS.items():
        fn = BUILD / logical_id
        code = WARM.format(
            function_dir=str(fn),
            layer_dir=str(layer),
            stub=STUB,
            calls=WARM_CALLS,
            route=route,
            event=str(ROOT / "events" / f"{EVENTS[route]}.json"),
            context=CONTEXT,
        )
        results[f"warm_overhead_ms_{route}"] = round(run(code, fn) * 1000, 3)
    return results


def shipped_files(path: Path) -> list[Path]:
    """What a deployment package of ``path`` holds (no bytecode caches)."""
    return [p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in shipped_files(path))


def zipped_bytes(path: Path) -> int:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for p in shipped_files(path):
            archive.write(p, p.relative_to(path))
    return len(buffer.getvalue())


def sizes() -> dict[str, int]:
    results = {
        "layer_bytes": tree_bytes(BUILD / "CoreLayer"),
        "layer_zip_bytes": zipped_bytes(BUILD / "CoreLayer"),
    }
    for route, logical_id in FUNCTIONS.items():
        results[f"function_bytes_{route}"] = tree_bytes(BUILD / logical_id)
    return results


def main() -> dict[str, float]:
    if not (BUILD / "CoreLayer").exists():
        raise SystemExit("no .aws-sam/build: run `sam build` (make bench does)")
    results: dict[str, float | str] = dict(machine_facts())
    print("server: sizes ...", flush=True)
    results |= sizes()
    layer = local_layer()
    print("server: cold starts ...", flush=True)
    started = time.perf_counter()
    results |= cold_starts(layer)
    print(f"server: warm overhead ... ({time.perf_counter() - started:.0f} s so far)", flush=True)
    results |= warm_overheads(layer)
    write_results("server", results)
    return results  # type: ignore[return-value]


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
