"""scripts/mutants.py breaks the code in named places; if the code moves on,
its mutants must follow, or they would silently test nothing."""

from __future__ import annotations

import pytest

from scripts.mutants import MUTANTS, ROOT, TOGETHER


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_still_finds_what_it_breaks(mutant):
    source = (ROOT / mutant.path).read_text()
    assert source.count(mutant.old) == 1, (
        f"{mutant.name}: its target is gone from (or repeated in) {mutant.path}"
    )


def test_every_mutant_is_checked_by_a_test_or_goes_with_one():
    companions = {name for names in TOGETHER.values() for name in names}
    for mutant in MUTANTS:
        assert mutant.tests or mutant.name in companions, mutant.name
        for target in mutant.tests:
            path = target.removeprefix("make:").split("::")[0]
            assert target.startswith("make:") or (ROOT / path).is_file(), target
