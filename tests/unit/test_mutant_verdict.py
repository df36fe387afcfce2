"""How scripts/mutants.py reads one pytest run: only a test failing on what
it checks catches a mutant; a run the mutant merely broke does not."""

from __future__ import annotations

import pytest

from scripts.mutant_verdict import verdict


def run_record(**changes):
    return {"collection_errors": [], "failures": [], "errors": [], "passed": [], "exitstatus": 0} | changes


def test_an_assertion_failing_in_a_test_catches_the_mutant():
    seen = run_record(failures=[["t.py::test_a", "AssertionError"]], exitstatus=1)
    assert verdict(seen)[0] == "fails"


@pytest.mark.parametrize(
    "seen",
    [
        run_record(collection_errors=["t.py"], exitstatus=2),
        run_record(errors=[["t.py::test_a", "setup: TimeoutError"]], exitstatus=1),
        run_record(failures=[["t.py::test_a", "ModuleNotFoundError"]], exitstatus=1),
        run_record(failures=[["t.py::test_a", "SyntaxError"]], exitstatus=1),
        run_record(exitstatus=4),  # a usage error: nothing ran
        run_record(),  # nothing collected
    ],
    ids=["collection-error", "fixture-error", "import-error", "syntax-error", "usage-error", "no-test"],
)
def test_a_run_the_mutant_only_broke_is_not_a_catch(seen):
    """Given a run that ended non-zero without a test failing on what it
    checks, then it is reported as broken (the old rule counted it caught)."""
    assert verdict(seen)[0] == "broken"


def test_a_collection_error_outweighs_a_failure_elsewhere():
    seen = run_record(collection_errors=["b.py"], failures=[["a.py::test_a", "AssertionError"]], exitstatus=2)
    assert verdict(seen)[0] == "broken"


def test_a_clean_run_passes():
    assert verdict(run_record(passed=["t.py::test_a"]))[0] == "passes"
