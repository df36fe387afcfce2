"""A pytest plugin for scripts/mutants.py: writes, as JSON to the file named
by IDBLOCKS_MUTANT_VERDICT, how each test ended, so that a mutant counts as
caught only when a test body failed on what it checks, never because the
mutated code could not be imported or a fixture could not start.

    python -m pytest -p scripts.mutant_verdict ...
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

# A test body failing with one of these met code that does not run at all:
# the mutant broke the module, which is not what any test is there to catch.
BROKEN_CODE = {"ImportError", "ModuleNotFoundError", "SyntaxError", "IndentationError", "NameError"}

_seen: dict[str, list[Any]] = {"collection_errors": [], "failures": [], "errors": [], "passed": []}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _seen["collection_errors"].append(report.nodeid or "<session>")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        kind = call.excinfo.typename if call.excinfo is not None else "unknown"
        if report.when == "call":
            _seen["failures"].append([item.nodeid, kind])
        else:
            _seen["errors"].append([item.nodeid, f"{report.when}: {kind}"])
    elif report.when == "call" and report.passed:
        _seen["passed"].append(item.nodeid)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("IDBLOCKS_MUTANT_VERDICT")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_seen | {"exitstatus": int(exitstatus)}, out)


def verdict(seen: dict[str, Any]) -> tuple[str, str]:
    """("fails" | "passes" | "broken", why) for one pytest run's record."""
    if seen["collection_errors"]:
        return "broken", f"collection error in {seen['collection_errors'][0]}"
    if seen["errors"]:
        nodeid, why = seen["errors"][0]
        return "broken", f"{why} in {nodeid}"
    real = [(nodeid, kind) for nodeid, kind in seen["failures"] if kind not in BROKEN_CODE]
    if real:
        return "fails", f"{real[0][1]} in {real[0][0]}"
    if seen["failures"]:
        nodeid, kind = seen["failures"][0]
        return "broken", f"{kind} in {nodeid}"
    if seen["exitstatus"] != 0:
        return "broken", f"pytest exit status {seen['exitstatus']} without a failing test"
    if not seen["passed"]:
        return "broken", "no test ran"
    return "passes", f"{len(seen['passed'])} passed"
