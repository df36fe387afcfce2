"""make test-repeat (scripts/test_repeat.py) says which test failed in which
run, and fails when any run did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scripts.test_repeat import ROOT

# Fails in its second run only: a flaky test, made to order. The runs are
# counted in a file beside it.
PROBE = """
from pathlib import Path

import pytest

RUNS = Path(__file__).with_name("runs")


def test_steady():
    pass


def test_flaky():
    runs = int(RUNS.read_text()) + 1 if RUNS.exists() else 1
    RUNS.write_text(str(runs))
    assert runs != 2


@pytest.fixture
def fixture_down_in_run_3():
    if int(RUNS.read_text()) == 3:
        raise RuntimeError("no fixture today")


def test_broken_setup(fixture_down_in_run_3):
    pass
"""


def test_it_names_each_failed_test_and_the_runs_it_failed_in(tmp_path: Path) -> None:
    """Given a test that fails in run 2 and one whose fixture fails in run 3,
    when the probe is run three times, then each run's line names its
    failures, the summary names the runs each test failed in, and the exit
    status says a run failed."""
    probe = tmp_path / "probe" / "test_probe.py"
    probe.parent.mkdir()
    probe.write_text(PROBE)
    logs = tmp_path / "logs"
    done = subprocess.run(
        [sys.executable, "-m", "scripts.test_repeat", "--runs", "3", "--logs", str(logs),
         "--", str(probe), "-p", "no:cacheprovider", "--rootdir", str(probe.parent)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "run 1: passed, 3 passed, 0 failed" in out
    assert "run 2: FAILED (pytest exit 1), 2 passed, 1 failed" in out
    assert "run 3: FAILED (pytest exit 1), 2 passed, 1 failed" in out
    assert "1 of 3 runs green" in out
    lines = out.splitlines()
    assert "    test_probe.py::test_flaky  [AssertionError]" in lines
    assert "    test_probe.py::test_broken_setup  [setup: RuntimeError]" in lines
    assert lines[-2:] == [
        "  failed in run 3: test_probe.py::test_broken_setup",
        "  failed in run 2: test_probe.py::test_flaky",
    ]
    assert sorted(path.name for path in logs.iterdir()) == [
        f"run-{i}.{kind}" for i in (1, 2, 3) for kind in ("json", "log")
    ]
