"""Server-side cost: cold start and warm overhead of each function, and the
size of what is deployed. Needs `sam build` output (make bench builds first).

    python -m bench server

Two ways of deploying are measured, side by side in the same rounds:

- as deployed: the template's defaults (Tracing Active: AWS traces from
  outside, no SDK in the function), with the trace header Lambda gives an
  invocation; Tracing Disabled runs the very same code;
- deep traces (``*_opentelemetry``): the OpenTelemetryLayerArn parameter
  set, the function started under AWS's OpenTelemetry layer as its wrapper
  starts it (bench/lambda_child.py, start_opentelemetry), with that layer's
  packages, pinned in bench/opentelemetry-layer.txt, installed for this
  machine in bench/.cache. Its spans go by UDP to 127.0.0.1:2000, where no
  daemon listens, as the layer sends them to Lambda's.

Cold start: a fresh interpreter imports the handler and serves its first
request, against the same interpreter doing only `import boto3` and creating
a DynamoDB client, in alternating rounds of one run. Each route reports the
median of its cold starts, the median of its own baseline rounds, and the
ratio of those two figures, so the ratio follows from the figures beside it.
Both load boto3 from the layer, as Lambda would, with the function's
environment from template.yaml and Lambda's own variables; DynamoDB is a
botocore Stubber (no network). The built layer is for arm64; it is measured
here as the same pinned requirements installed for this machine
(bench/.cache), with the same idblocks_core. Under the OpenTelemetry layer,
Lambda starts one more interpreter before the runtime's (the layer's wrapper
runs opentelemetry-instrument, which then starts the runtime): its time is
measured in the same rounds (``cold_start_ms_opentelemetry_wrapper``, that
interpreter starting /bin/true, less /bin/true alone) and added to each
route's deep-trace cold start; the wrapper's own shell script is not.

Where the next function's cold start goes is measured in rounds interleaved
with its cold starts: the steps of the round with the median total, which
add up to that total (what runs between two marks, e.g. building the stub,
counts in the step it precedes).

Warm overhead: one interpreter, the handler already loaded, invoked many
times with DynamoDB stubbed; the median time per invocation is all handler.
Beside it, in alternating rounds, a bare handler makes the same stubbed call
with a plain boto3 client and returns JSON: each route's warm ratio is its
time over the bare handler's. Each route is measured as deployed and with
deep traces, the request sampled and not, in those rounds, with the mix
X-Ray's default sampling rule makes of the last two (warm_overheads).

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
from collections.abc import Sequence
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
        # what the Lambda runtime sets (Powertools and the OpenTelemetry layer read some of it)
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
    """The lines a run of bench/lambda_child.py with ``child_args`` printed."""
    return child_run(child_args, cwd, env).stdout.strip().splitlines()


def child_run(
    child_args: list[str], cwd: Path, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run bench/lambda_child.py with ``child_args`` in a fresh interpreter
    (under ``prefix``, a tool that runs it: valgrind, say).

    -S: no site-packages, so only the standard library, the layer and this
    project's own modules (for bench.lambda_child and localrun's Lambda
    context, which import nothing outside the standard library) are
    importable, as in Lambda (this environment's extras, such as awscrt or
    pyOpenSSL, would change what botocore loads). ``env`` is laid over the
    function's environment."""
    out = subprocess.run(
        [*prefix, sys.executable, "-S", "-m", "bench.lambda_child", *child_args],
        capture_output=True,
        text=True,
        env=lambda_environment(cwd) | {"PYTHONPATH": str(ROOT)} | (env or {}),
        cwd=cwd,
    )
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return out


def _installed(name: str, requirements: Path, *, compiled: bool = False) -> Path:
    """``requirements`` installed for this machine under bench/.cache, once
    per version of the file (``compiled``: with their bytecode, as a layer
    ships it)."""
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    target = ROOT / "bench" / ".cache" / f"{name}-{platform.machine()}-{digest}" / "python"
    if not target.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
             "-r", str(requirements)],
            check=True,
        )  # fmt: skip
        if compiled:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)
    return target


def local_layer() -> Path:
    """The layer's contents for this machine's architecture."""
    target = _installed("layer", ROOT / "layers" / "core" / "requirements.txt")
    core = target / "idblocks_core"
    shutil.rmtree(core, ignore_errors=True)
    shutil.copytree(BUILD / "CoreLayer" / "python" / "idblocks_core", core)
    # Lambda finds the layer's bytecode cached after the first container;
    # compile once so both sides of the comparison read .pyc files.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(BUILD)], check=True)
    return target


def cold_starts(layer: Path, opentelemetry: dict[str, str]) -> dict[str, float]:
    """Each route's cold start as deployed and with deep traces
    (``opentelemetry``: the environment that starts the function under the
    OpenTelemetry layer), beside its baseline, in alternating rounds; the
    deep-trace figure includes the wrapper's extra interpreter, measured in
    the same rounds. ``cold_start_*_{route}`` without a suffix is the figure
    as deployed, under the names earlier runs gave it."""
    results: dict[str, float] = {}
    wrapper = []
    for route, logical_id in FUNCTIONS.items():
        fn = BUILD / logical_id
        cold_args = ["cold", str(fn), str(layer), route, str(ROOT / "events" / f"{EVENTS[route]}.json")]
        cold, traced, base, steps = [], [], [], []
        for _ in range(ROUNDS):
            base.append(run(["baseline", str(layer)], fn))
            cold.append(run(cold_args, fn))
            traced.append(run(cold_args, fn, opentelemetry))
            wrapper.append(wrapper_start(layer, opentelemetry))
            if route == "next":
                steps.append(breakdown_round(layer))
        base_ms = statistics.median(base) * 1000
        results[f"cold_start_baseline_ms_{route}"] = round(base_ms, 1)
        cold_ms = statistics.median(cold) * 1000
        for suffix in ("", "_as_deployed"):
            results[f"cold_start_ms_{route}{suffix}"] = round(cold_ms, 1)
            results[f"cold_start_ratio_{route}{suffix}"] = round(cold_ms / base_ms, 3)
        traced_ms = statistics.median(traced) * 1000
        results[f"cold_start_ms_{route}_opentelemetry_in_runtime"] = round(traced_ms, 1)
        if steps:
            results |= breakdown(steps)
    wrapper_ms = statistics.median(wrapper) * 1000
    results["cold_start_ms_opentelemetry_wrapper"] = round(wrapper_ms, 1)
    for route in FUNCTIONS:
        traced_ms = results[f"cold_start_ms_{route}_opentelemetry_in_runtime"] + wrapper_ms
        results[f"cold_start_ms_{route}_opentelemetry"] = round(traced_ms, 1)
        results[f"cold_start_ratio_{route}_opentelemetry"] = round(
            traced_ms / results[f"cold_start_baseline_ms_{route}"], 3
        )
    return results


def wrapper_start(layer: Path, opentelemetry: dict[str, str]) -> float:
    """Seconds the OpenTelemetry layer's extra interpreter adds to a cold
    start: opentelemetry-instrument starting /bin/true (as it starts the
    runtime) less /bin/true started alone, each timed from this process,
    with both layers' packages on the path as in /opt/python."""
    layer_dir = opentelemetry["BENCH_OPENTELEMETRY"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{layer}:{layer_dir}"}
    wrapped = [sys.executable, "-S", str(Path(layer_dir) / "bin" / "opentelemetry-instrument"), "/bin/true"]
    times = []
    for command in (wrapped, ["/bin/true"]):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True)
        times.append(time.perf_counter() - started)
    return times[0] - times[1]


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


OPENTELEMETRY_REQUIREMENTS = ROOT / "bench" / "opentelemetry-layer.txt"
# The instrumentations the layer's wrapper leaves enabled; it disables every
# other one it ships, and starts aws-lambda's itself, around the handler.
OPENTELEMETRY_ENABLED = {"botocore", "urllib", "urllib3"}


def opentelemetry_layer() -> Path:
    """What AWS's OpenTelemetry layer puts in /opt/python, installed for
    this machine from bench/opentelemetry-layer.txt (bench only)."""
    return _installed("opentelemetry", OPENTELEMETRY_REQUIREMENTS, compiled=True)


def opentelemetry_environment(layer_dir: Path) -> dict[str, str]:
    """What the OpenTelemetry layer's wrapper (/opt/otel-instrument) sets
    before it starts the runtime, as the layer's defaults have it, and where
    the bench's child finds the layer's packages."""
    from importlib.metadata import distributions

    instrumentations = {
        entry.name
        for dist in distributions(path=[str(layer_dir)])
        for entry in dist.entry_points
        if entry.group == "opentelemetry_instrumentor"
    }
    function = "bench"
    return {
        "BENCH_OPENTELEMETRY": str(layer_dir),
        "ORIG_HANDLER": "app.lambda_handler",
        "OTEL_SERVICE_NAME": function,
        "OTEL_RESOURCE_ATTRIBUTES": (
            f"cloud.region=us-east-1,cloud.platform=aws_lambda,cloud.provider=aws,faas.name={function},"
            f"faas.version=$LATEST,faas.instance=local,aws.log.group.names=/aws/lambda/{function}"
        ),
        "OTEL_PROPAGATORS": "baggage,xray,tracecontext",
        "OTEL_AWS_APPLICATION_SIGNALS_ENABLED": "true",
        "OTEL_AWS_APPLICATION_SIGNALS_RUNTIME_ENABLED": "false",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISTRO": "aws_distro",
        "OTEL_PYTHON_CONFIGURATOR": "aws_configurator",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(sorted(instrumentations - OPENTELEMETRY_ENABLED)),
    }


# The request not sampled: what X-Ray's default rule makes of all but the
# first request a second and 5 % of the rest.
UNSAMPLED = {"_X_AMZN_TRACE_ID": f"{TRACE_HEADER};Sampled=0"}


def warm_variants(opentelemetry: dict[str, str]) -> dict[str, dict[str, str] | None]:
    """Each route's variants, measured in the same rounds, by result-name
    suffix: as deployed (the request sampled or not makes no difference to
    code that traces nothing), and deep traces, sampled and not."""
    return {
        "_as_deployed": None,
        "_opentelemetry": opentelemetry,
        "_opentelemetry_unsampled": opentelemetry | UNSAMPLED,
    }


def warm_overheads(layer: Path, opentelemetry: dict[str, str]) -> dict[str, float]:
    """Each route's median warm invocation beside a bare handler's making the
    same stubbed DynamoDB call (bench/lambda_child.py, bare_handler), in
    alternating rounds: the ratio says what the handler adds to the call it
    cannot avoid, whatever the machine. ``*_as_deployed`` is the template's
    defaults; ``*_opentelemetry`` deep traces with every request sampled (a
    span for the invocation and one per DynamoDB call, sent by UDP), and
    ``*_opentelemetry_unsampled`` with the request not sampled (the layer
    still records, and sends, its spans for Application Signals).
    ``*_opentelemetry_default_sampling`` is what deep traces cost per request
    on average under X-Ray's default rule at rates well above one request a
    second: 5 % of requests sampled (bench/cost.py's rate)."""
    results: dict[str, float] = {}
    variants = warm_variants(opentelemetry)
    for route, logical_id in FUNCTIONS.items():
        fn = BUILD / logical_id
        event = str(ROOT / "events" / f"{EVENTS[route]}.json")
        ours_args = ["warm", str(fn), str(layer), route, event, str(WARM_CALLS)]
        times: dict[str, list[float]] = {suffix: [] for suffix in variants}
        bare = []
        for _ in range(WARM_ROUNDS):
            bare.append(run(["bare", str(layer), route, event, str(WARM_CALLS)], fn))
            for suffix, env in variants.items():
                times[suffix].append(run(ours_args, fn, env))
        bare_ms = statistics.median(bare) * 1000
        results[f"warm_bare_ms_{route}"] = round(bare_ms, 3)
        ours = {suffix: statistics.median(measured) * 1000 for suffix, measured in times.items()}
        sampled, unsampled = ours["_opentelemetry"], ours["_opentelemetry_unsampled"]
        rate = XRAY_FIXED_RATE
        ours["_opentelemetry_default_sampling"] = rate * sampled + (1 - rate) * unsampled
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
    opentelemetry = opentelemetry_environment(opentelemetry_layer())
    results["opentelemetry_layer_bytes"] = tree_bytes(Path(opentelemetry["BENCH_OPENTELEMETRY"]))
    print("server: cold starts ...", flush=True)
    started = time.perf_counter()
    results |= cold_starts(layer, opentelemetry)
    print(f"server: warm overhead ... ({time.perf_counter() - started:.0f} s so far)", flush=True)
    results |= warm_overheads(layer, opentelemetry)
    print(f"server: layer size ... ({time.perf_counter() - started:.0f} s so far)", flush=True)
    results |= layer_size_effect(layer)
    write_results("server", results)
    return results  # type: ignore[return-value]


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
