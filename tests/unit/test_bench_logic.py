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


def test_each_cold_start_ratio_follows_from_its_own_figures(monkeypatch):
    """The server table showed one baseline (the last route's, written over
    per route) beside ratios that were medians of per-round ratios, so no
    ratio could be worked out from the figures beside it. Each route now has
    its own baseline, and its ratio is its cold start over that baseline."""
    from bench import server

    # per route, rounds alternate baseline, cold: distinct figures per route
    figures = iter(
        [
            *[0.300, 0.600, 0.310, 0.500, 0.290, 0.700],  # next
            *[0.200, 0.500, 0.400, 0.900, 0.300, 0.800],  # batch
            *[0.250, 0.250, 0.260, 0.390, 0.240, 0.480],  # admin
        ]
    )
    monkeypatch.setattr(server, "ROUNDS", 3)
    monkeypatch.setattr(server, "run", lambda code, cwd: next(figures))
    monkeypatch.setattr(server, "breakdown_round", lambda layer: [0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6])
    results = server.cold_starts(server.ROOT)
    expected = {"next": (600.0, 300.0), "batch": (800.0, 300.0), "admin": (390.0, 250.0)}
    for route, (cold, base) in expected.items():
        assert (results[f"cold_start_ms_{route}"], results[f"cold_start_baseline_ms_{route}"]) == (cold, base)
        assert results[f"cold_start_ratio_{route}"] == round(cold / base, 3)
    assert "cold_start_ms_baseline" not in results


def test_warm_ratios_are_reported_sampled_unsampled_and_untraced_beside_one_bare_handler(monkeypatch):
    """Given a bench whose bare handler traces nothing, when the warm rounds
    run, then each route is measured sampled, unsampled and with tracing off
    in the same rounds, every ratio follows from the figures beside it, and
    the default-sampling figure is the default rule's mix of the first two."""
    from bench import server

    calls = []

    def fake_run(args, cwd, env=None):
        calls.append((args[0], env))
        if args[0] == "bare":
            return 0.0002
        return {None: 0.0006, "unsampled": 0.0004, "off": 0.0003}[
            None if env is None else ("off" if env == server.TRACING_OFF else "unsampled")
        ]

    monkeypatch.setattr(server, "WARM_ROUNDS", 1)
    monkeypatch.setattr(server, "run", fake_run)
    results = server.warm_overheads(server.ROOT)
    for route in server.FUNCTIONS:
        assert results[f"warm_bare_ms_{route}"] == 0.2
        assert (results[f"warm_overhead_ms_{route}"], results[f"warm_ratio_{route}"]) == (0.6, 3.0)
        assert (results[f"warm_overhead_ms_{route}_unsampled"], results[f"warm_ratio_{route}_unsampled"]) == (
            0.4,
            2.0,
        )
        assert results[f"warm_overhead_ms_{route}_tracing_off"] == 0.3
        assert results[f"warm_ratio_{route}_tracing_off"] == 1.5
        assert results[f"warm_overhead_ms_{route}_default_sampling"] == 0.41  # 5 % at 0.6, 95 % at 0.4
        assert results[f"warm_ratio_{route}_default_sampling"] == 2.05
    for env in server.WARM_VARIANTS.values():
        assert calls.count(("warm", env)) == len(server.FUNCTIONS)
    assert "Sampled=0" in server.UNSAMPLED["_X_AMZN_TRACE_ID"]


def test_the_breakdown_adds_up_to_the_total_it_reports():
    """The cold-start breakdown added up to 494 of 584 ms with no word on the
    rest: its steps were medians of separate columns. Now they are the steps
    of the median round and add up to that round's total."""
    from bench import server

    rounds = [
        [0.2, 0.21, 0.25, 0.36, 0.38, 0.46, 0.47],
        [0.25, 0.27, 0.30, 0.40, 0.43, 0.50, 0.52],  # the median total
        [0.30, 0.31, 0.36, 0.50, 0.52, 0.61, 0.63],
    ]
    results = server.breakdown(rounds)
    steps = [results[f"cold_next_ms_{name}"] for name in server.STEPS]
    assert len(steps) == len(server.BREAKDOWN) + 1
    assert results["cold_next_ms_breakdown_total"] == 520.0
    assert round(sum(steps), 1) == 520.0
    assert results["cold_next_ms_botocore_import"] == 250.0


def test_the_layer_variants_change_only_what_they_say(tmp_path, monkeypatch):
    """The layer-size experiment compares the layer with a copy that has the
    packages it carried before (pydantic), and one without botocore's other
    service models: each copy must differ by exactly that, and the layer
    itself stay whole."""
    from bench import server

    def add_packages(target, pins):
        assert pins == server.BEFORE_PINS
        (target / "pydantic").mkdir()
        (target / "pydantic" / "main.py").write_text("x")

    monkeypatch.setattr(server, "add_packages", add_packages)

    layer = tmp_path / "layer-x" / "python"
    for relative in (
        "botocore/client.py",
        "botocore/data/endpoints.json",
        "botocore/data/dynamodb/2012-08-10/service-2.json",
        "botocore/data/s3/2006-03-01/service-2.json",
        "idblocks_core/core.py",
    ):
        (layer / relative).parent.mkdir(parents=True, exist_ok=True)
        (layer / relative).write_text("x")

    def files(root):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    whole = files(layer)
    variants = server.layer_variants(layer)
    assert files(variants["full"]) == whole
    assert files(variants["before_with_pydantic"]) == sorted([*whole, "pydantic/main.py"])
    assert files(variants["dynamodb_model_only"]) == [
        f for f in whole if not f.startswith("botocore/data/s3/")
    ]
