"""The metric behind the "counter running low" alarm: one metric for every
counter (no per-name dimension), its value the share of 1..max left."""

from __future__ import annotations

import json

import pytest


def emitted(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    lines = capsys.readouterr().out.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{") and '"_aws"' in line]


def test_each_allocation_reports_the_counters_range_left(api, capsys):
    """A counter of 1..1000 handing out 250 then 650 IDs reports 75% then 10%
    left, with the counter's name in the log line and never as a dimension."""
    assert api.call("admin-create", body={"name": "tickets", "max": 1000}).status == 201
    capsys.readouterr()
    assert api.call("batch", name="tickets", body={"count": 250}).status == 200
    [first] = emitted(capsys)
    assert api.call("batch", name="tickets", body={"count": 650}).status == 200
    [second] = emitted(capsys)
    assert (first["CounterRangeLeftPercent"], second["CounterRangeLeftPercent"]) == ([75.0], [10.0])
    assert second["counter"] == "tickets"
    for line in (first, second):
        [directive] = line["_aws"]["CloudWatchMetrics"]
        assert all("counter" not in dimensions for dimensions in directive["Dimensions"])
        units = {metric["Name"]: metric.get("Unit") for metric in directive["Metrics"]}
        assert units["CounterRangeLeftPercent"] == "Percent"
