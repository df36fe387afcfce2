"""Two stacks in one account and region (idblocks and idblocks-scratch) share
no custom metric: each stack's functions emit their metrics under the
stack's name (the service dimension), and each stack's alarms and dashboard
read its own. The metrics emitted are what the functions print, run as each
stack's (tests/support/metrics.py); what the alarms and widgets read comes
from the template as CloudFormation deploys it in each stack. Every alarm
and widget is read, not a list of them: one added later is held to the same."""

from __future__ import annotations

from itertools import permutations

import pytest

from localrun.template import STACK, Stack, Template
from tests.support.metrics import Metric, emitted, read_by, start_emitting

# The production stack and a stack to try things on, side by side (samconfig.toml).
STACKS = (STACK, Stack(name="idblocks-scratch"))


@pytest.fixture(scope="module")
def emitted_by() -> dict[Stack, set[Metric]]:
    """Each stack -> the custom metrics its functions emit taking IDs every way."""
    runs = {stack: start_emitting(stack) for stack in STACKS}  # side by side: a second each
    return {stack: emitted(run) for stack, run in runs.items()}


def _read(stack: Stack) -> dict[str, set[Metric]]:
    return read_by(Template(stack=stack).transformed)


def _scheme(metrics: set[Metric]) -> set[tuple[str, str | None]]:
    """The namespace and service dimension the metrics are under."""
    return {(namespace, dict(dimensions).get("service")) for namespace, _, dimensions in metrics}


def test_each_stacks_functions_emit_under_the_stacks_name(emitted_by):
    """The service dimension was the literal idblocks in every stack: two
    stacks' allocations added to one metric, and one running a counter low
    fired the other's alarm."""
    for stack, metrics in emitted_by.items():
        assert metrics, stack
        assert _scheme(metrics) == {("idblocks", stack.name)}, stack


def test_no_alarm_or_widget_of_one_stack_reads_a_metric_the_other_emits(emitted_by):
    for reader, emitter in permutations(STACKS):
        for where, metrics in _read(reader).items():
            shared = metrics & emitted_by[emitter]
            assert not shared, f"{reader.name}'s {where} reads {emitter.name}'s {sorted(shared)}"
            # Nor one the run did not happen to emit (a metric only a rare
            # event emits) under the other stack's name.
            assert not _scheme(metrics) & _scheme(emitted_by[emitter]), (reader.name, where)


def test_each_stacks_alarms_and_widgets_read_what_its_functions_emit(emitted_by):
    """Every custom metric an alarm or a widget reads is under the stack's
    own scheme, and where the run emitted that metric's name, it is exactly
    a metric the run emitted: name, namespace and every dimension."""
    for stack in STACKS:
        read = _read(stack)
        emitted_names = {name for _, name, _ in emitted_by[stack]}
        checked = set()
        for where, metrics in read.items():
            assert _scheme(metrics) <= _scheme(emitted_by[stack]), (stack.name, where)
            for metric in metrics:
                if metric[1] in emitted_names:
                    assert metric in emitted_by[stack], (stack.name, where, metric)
                    checked.add(where)
        # The running-low alarm and the dashboard's widgets of the service's own
        # metrics were compared metric by metric, not only by scheme.
        assert "CounterLowAlarm" in checked
        assert sum(where.startswith("Dashboard") for where in checked) >= 4
