"""Run the test suites several times and say which tests failed in which run,
so that a test that fails only sometimes (on a loaded machine, say) is found
before it turns a CI run red.

    python -m scripts.test_repeat --runs 5 [-- PYTEST ARGS]      (make test-repeat N=5)

Each run is a whole `python -m pytest` (with the given arguments), one after
the other, not in parallel; its output goes to .test-repeat/run-<i>.log
(--logs DIR for another place), and how each test
ended is recorded by the plugin scripts/mutants.py uses
(scripts.mutant_verdict). Exits 1 when any run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / ".test-repeat"


@dataclass
class Run:
    number: int
    exitstatus: int
    seconds: float
    passed: int = 0
    # nodeid -> how it failed ("AssertionError", "setup: TimeoutError", ...)
    failed: dict[str, str] = field(default_factory=dict)


def read_run(number: int, exitstatus: int, seconds: float, record: Path) -> Run:
    run = Run(number, exitstatus, seconds)
    if not record.exists():  # pytest ended before its session did
        return run
    seen = json.loads(record.read_text(encoding="utf-8"))
    run.passed = len(seen["passed"])
    for nodeid in seen["collection_errors"]:
        run.failed[nodeid] = "collection error"
    for nodeid, kind in seen["failures"] + seen["errors"]:
        run.failed.setdefault(nodeid, kind)
    return run


def one_run(number: int, pytest_args: list[str], logs: Path) -> Run:
    logs.mkdir(exist_ok=True)
    record = logs / f"run-{number}.json"
    record.unlink(missing_ok=True)
    log = logs / f"run-{number}.log"
    env = os.environ | {"IDBLOCKS_MUTANT_VERDICT": str(record)}
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        status = subprocess.call(
            [sys.executable, "-m", "pytest", "-p", "scripts.mutant_verdict", *pytest_args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return read_run(number, status, time.monotonic() - started, record)


def describe(run: Run, logs: Path) -> list[str]:
    verdict = "passed" if run.exitstatus == 0 else f"FAILED (pytest exit {run.exitstatus})"
    counts = f"{run.passed} passed, {len(run.failed)} failed, {run.seconds:.0f} s"
    lines = [f"run {run.number}: {verdict}, {counts}"]
    lines += [f"    {nodeid}  [{kind}]" for nodeid, kind in sorted(run.failed.items())]
    if run.exitstatus != 0 and not run.failed:
        lines.append(f"    no failed test recorded: see {logs / f'run-{run.number}.log'}")
    return lines


def summary(runs: list[Run]) -> list[str]:
    by_test: dict[str, list[int]] = {}
    for run in runs:
        for nodeid in run.failed:
            by_test.setdefault(nodeid, []).append(run.number)
    green = sum(run.exitstatus == 0 for run in runs)
    lines = [f"{green} of {len(runs)} runs green"]
    for nodeid, numbers in sorted(by_test.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"  failed in run {', '.join(map(str, numbers))}: {nodeid}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="how many times to run the suites (default 5)")
    parser.add_argument("--logs", type=Path, default=LOGS, help="where each run's output goes")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    runs = []
    for number in range(1, args.runs + 1):
        print(f"run {number} of {args.runs}: python -m pytest {' '.join(args.pytest_args)}", flush=True)
        runs.append(one_run(number, args.pytest_args, args.logs))
        print("\n".join(describe(runs[-1], args.logs)), flush=True)
    print("\n".join(summary(runs)))
    return 0 if all(run.exitstatus == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
