"""The benchmarks' own logic, on small sizes (no timings are checked here:
speed is for `make bench`, never a reason for a test to fail)."""

from __future__ import annotations

import json

import pytest

from bench import client, common


@pytest.fixture
def small_pressure(monkeypatch):
    monkeypatch.setattr(client, "PRESSURE_RATE", 20_000)
    monkeypatch.setattr(client, "PRESSURE_SECONDS", 1)


@pytest.mark.parametrize(("size", "requests"), [(1, 20_000), (100, 200), (10_000, 2)])
def test_pressure_with_fixed_blocks_asks_exactly_as_often_as_arithmetic_says(small_pressure, size, requests):
    assert client._pressure_run(block_size=size) == (requests, 0)


def test_pressure_adaptive_asks_far_less_than_fixed_small_blocks(small_pressure):
    requests, unused = client._pressure_run()
    assert requests < 20
    assert unused < 20_000 * 5  # at most about one runway (5 s) of IDs held


def test_results_are_flat_json(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    path = common.write_results("x", {"a": 1, "b": "two"})
    assert json.loads(path.read_text()) == {"a": 1, "b": "two"}
    with pytest.raises(AssertionError):
        common.write_results("y", {"nested": {"a": 1}})
