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
Beside it, in alternating rounds, a bare handler makes the same stubbed call
with a plain boto3 client and returns JSON: each route's warm ratio is its
time over the bare handler's. Each route is measured three ways in those
rounds: tracing on with every request sampled, tracing on with the request
not sampled, and tracing off (POWERTOOLS_TRACE_DISABLED, as the Tracing
parameter's PassThrough sets it), the bare handler tracing nothing; with the
mix X-Ray's default sampling rule makes of the first two (warm_overheads).

Writes bench/results/server.json.
"""

from __future__ import annotations

import hashlib
import json
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
from bench.cost import XRAY_FIXED_RATE
from bench.lambda_child import BREAKDOWN
from localrun.environment import AWS_PREFIXES, scrubbed_environment
from localrun.tables import TABLE_NAMES
from localrun.template import ROOT, default_template

BUILD = ROOT / ".aws-sam" / "build"
ROUNDS = 9
WARM_CALLS = 2000
WARM_ROUNDS = 5
FUNCTIONS = {"next": "NextFunction", "batch": "BatchFunction", "admin": "AdminFunction"}
EVENTS = {"next": "next-post", "batch": "batch", "admin": "admin-get"}
# The trace Lambda says an invocation belongs to, less its sampling decision.
TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8"


def lambda_environment(function_dir: Path) -> dict[str, str]:
    env = scrubbed_environment((*AWS_PREFIXES, "PYTHON", "_X_AMZN"))
    env |= default_template().environment("NextFunction", TABLE_NAMES)
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
        "_X_AMZN_TRACE_ID": f"{TRACE_HEADER};Sampled=1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return env


def run(child_args: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    return [float(x) for x in run_lines(child_args, cwd, env)[-1].split()][-1]


def run_lines(child_args: list[str], cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """Run bench/lambda_child.py with ``child_args`` in a fresh interpreter.

    -S: no site-packages, so only the standard library, the layer and this
    project's own modules (for bench.lambda_child and localrun's Lambda
    context, which import nothing outside the standard library) are
    importable, as in Lambda (this environment's extras, such as awscrt or
    pyOpenSSL, would change what botocore loads). ``env`` is laid over the
    function's environment."""
    out = subprocess.run(
        [sys.executable, "-S", "-m", "bench.lambda_child", *child_args],
        capture_output=True,
        text=True,
        env=lambda_environment(cwd) | {"PYTHONPATH": str(ROOT)} | (env or {}),
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
        cold_args = ["cold", str(fn), str(layer), route, str(ROOT / "events" / f"{EVENTS[route]}.json")]
        cold, base, steps = [], [], []
        for _ in range(ROUNDS):
            base.append(run(["baseline", str(layer)], fn))
            cold.append(run(cold_args, fn))
            if route == "next":
                steps.append(breakdown_round(layer))
        cold_ms, base_ms = statistics.median(cold) * 1000, statistics.median(base) * 1000
        results[f"cold_start_ms_{route}"] = round(cold_ms, 1)
        results[f"cold_start_baseline_ms_{route}"] = round(base_ms, 1)
        results[f"cold_start_ratio_{route}"] = round(cold_ms / base_ms, 3)
        if steps:
            results |= breakdown(steps)
    return results


STEPS = [*BREAKDOWN, "first_invocation"]


def breakdown_round(layer: Path) -> list[float]:
    """One cold start of the next function, timed step by step: the seconds
    from the start to the end of each step."""
    fn = BUILD / FUNCTIONS["next"]
    event = str(ROOT / "events" / "next-post.json")
    marks = run_lines(["breakdown", str(fn), str(layer), event], fn)[-1].split()
    if len(marks) != len(STEPS):
        raise RuntimeError(f"the breakdown has {len(STEPS)} steps, the child marked {len(marks)}")
    return [float(x) for x in marks]


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


# What the layer carried until it held only what runs: pydantic, which no
# function imports (it describes responses for the OpenAPI document, at
# development time), at the pins it had. Installed beside a copy of the
# layer, it gives the layer's size and cold start before, in the same run.
BEFORE_PINS = (
    "pydantic==2.13.5",
    "pydantic-core==2.46.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
)


def add_packages(target: Path, pins: tuple[str, ...]) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), *pins],
        check=True,
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)


def layer_variants(layer: Path) -> dict[str, Path]:
    """The layer as built, as it was with pydantic, and with botocore's
    service models cut to DynamoDB's: copies beside it, with their bytecode
    (copied with their timestamps, so it stays valid)."""
    variants = {"full": layer}
    for name in ("before_with_pydantic", "dynamodb_model_only"):
        target = layer.parent.parent / f"{layer.parent.name}-{name}" / "python"
        shutil.rmtree(target.parent, ignore_errors=True)
        shutil.copytree(layer, target, copy_function=shutil.copy2)
        if name == "before_with_pydantic":
            add_packages(target, BEFORE_PINS)
        else:
            for path in (target / "botocore" / "data").iterdir():
                if path.is_dir() and path.name != "dynamodb":
                    shutil.rmtree(path)
        variants[name] = target
    return variants


def layer_size_effect(layer: Path) -> dict[str, float]:
    """Does the layer's size weigh in the cold start beyond what is
    imported? The next function's cold start with each variant of the layer
    (layer_variants), in alternating rounds, and each variant's size."""
    fn = BUILD / FUNCTIONS["next"]
    event = str(ROOT / "events" / f"{EVENTS['next']}.json")
    variants = layer_variants(layer)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, path in variants.items():
            times[name].append(run(["cold", str(fn), str(path), "next", event], fn))
    results: dict[str, float] = {}
    for name, path in variants.items():
        results[f"cold_start_ms_next_layer_{name}"] = round(statistics.median(times[name]) * 1000, 1)
        results[f"layer_bytes_{name}"] = tree_bytes(path)
    return results


# The Tracing parameter set to PassThrough, as template.yaml turns tracing off.
TRACING_OFF = {"POWERTOOLS_TRACE_DISABLED": "true"}
# Tracing on, and the request not sampled: what X-Ray's default rule makes of
# all but the first request a second and 5 % of the rest.
UNSAMPLED = {"_X_AMZN_TRACE_ID": f"{TRACE_HEADER};Sampled=0"}
# Each route's variants, measured in the same rounds, by result-name suffix.
WARM_VARIANTS = {"": None, "_unsampled": UNSAMPLED, "_tracing_off": TRACING_OFF}


def warm_overheads(layer: Path) -> dict[str, float]:
    """Each route's median warm invocation beside a bare handler's making the
    same stubbed DynamoDB call (bench/lambda_child.py, bare_handler), in
    alternating rounds: the ratio says what the handler adds to the call it
    cannot avoid, whatever the machine. The route is measured with tracing on
    and every request sampled (``warm_ratio_*``: an X-Ray subsegment for the
    handler and one for the DynamoDB call, each sent by UDP), with tracing on
    and the request not sampled (``*_unsampled``), and with tracing off
    (``*_tracing_off``, like with like: the bare handler traces nothing).
    ``*_default_sampling`` is what a deployment with Tracing Active pays per
    request on average under X-Ray's default rule at rates well above one
    request a second: 5 % of requests sampled (bench/cost.py's rate)."""
    results: dict[str, float] = {}
    for route, logical_id in FUNCTIONS.items():
        fn = BUILD / logical_id
        event = str(ROOT / "events" / f"{EVENTS[route]}.json")
        ours_args = ["warm", str(fn), str(layer), route, event, str(WARM_CALLS)]
        times: dict[str, list[float]] = {suffix: [] for suffix in WARM_VARIANTS}
        bare = []
        for _ in range(WARM_ROUNDS):
            bare.append(run(["bare", str(layer), route, event, str(WARM_CALLS)], fn))
            for suffix, env in WARM_VARIANTS.items():
                times[suffix].append(run(ours_args, fn, env))
        bare_ms = statistics.median(bare) * 1000
        results[f"warm_bare_ms_{route}"] = round(bare_ms, 3)
        ours = {suffix: statistics.median(measured) * 1000 for suffix, measured in times.items()}
        ours["_default_sampling"] = XRAY_FIXED_RATE * ours[""] + (1 - XRAY_FIXED_RATE) * ours["_unsampled"]
        for suffix, ours_ms in ours.items():
            results[f"warm_overhead_ms_{route}{suffix}"] = round(ours_ms, 3)
            results[f"warm_ratio_{route}{suffix}"] = round(ours_ms / bare_ms, 3)
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
    print(f"server: layer size ... ({time.perf_counter() - started:.0f} s so far)", flush=True)
    results |= layer_size_effect(layer)
    write_results("server", results)
    return results  # type: ignore[return-value]


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
