"""The benchmarks' own logic, on small sizes (no timings are checked here:
speed is for `make bench`, never a reason for a test to fail)."""

from __future__ import annotations

import json

import pytest

from bench import cached_next, client, common
from idblocks_core.logic import next_cache


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


OTEL = {"BENCH_OPENTELEMETRY": "/layer", "ORIG_HANDLER": "app.lambda_handler"}


def test_each_cold_start_ratio_follows_from_its_own_figures(monkeypatch):
    """The server table showed one baseline (the last route's, written over
    per route) beside ratios that were medians of per-round ratios, so no
    ratio could be worked out from the figures beside it. Each route now has
    its own baseline, and each of its ratios, as deployed and with deep
    traces (whose figure adds the wrapper's interpreter), is its cold start
    over that baseline."""
    from bench import server

    # per route, rounds run baseline, as deployed, deep traces: distinct figures per route
    figures = iter(
        [
            *[0.300, 0.600, 0.900, 0.310, 0.500, 1.000, 0.290, 0.700, 0.800],  # next
            *[0.200, 0.500, 0.600, 0.400, 0.900, 0.700, 0.300, 0.800, 0.650],  # batch
            *[0.250, 0.250, 0.500, 0.260, 0.390, 0.450, 0.240, 0.480, 0.550],  # admin
        ]
    )
    wrappers = iter([0.010, 0.030, 0.020] * 3)
    seen_env = []

    def fake_run(args, cwd, env=None):
        seen_env.append((args[0], env))
        return next(figures)

    monkeypatch.setattr(server, "ROUNDS", 3)
    monkeypatch.setattr(server, "run", fake_run)
    monkeypatch.setattr(server, "wrapper_start", lambda layer, env: next(wrappers))
    monkeypatch.setattr(server, "breakdown_round", lambda layer: [0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6])
    results = server.cold_starts(server.ROOT, OTEL)
    expected = {"next": (600.0, 300.0, 900.0), "batch": (800.0, 300.0, 650.0), "admin": (390.0, 250.0, 500.0)}
    assert results["cold_start_ms_opentelemetry_wrapper"] == 20.0
    for route, (cold, base, traced) in expected.items():
        assert results[f"cold_start_baseline_ms_{route}"] == base
        for suffix in ("", "_as_deployed"):
            assert results[f"cold_start_ms_{route}{suffix}"] == cold
            assert results[f"cold_start_ratio_{route}{suffix}"] == round(cold / base, 3)
        assert results[f"cold_start_ms_{route}_opentelemetry_in_runtime"] == traced
        assert results[f"cold_start_ms_{route}_opentelemetry"] == traced + 20.0
        assert results[f"cold_start_ratio_{route}_opentelemetry"] == round((traced + 20.0) / base, 3)
    assert "cold_start_ms_baseline" not in results
    # the deep-trace cold starts, and only they, ran in the OpenTelemetry layer's environment
    assert [env for mode, env in seen_env if mode == "cold"] == [None, OTEL] * 9


def test_warm_ratios_are_reported_as_deployed_and_with_deep_traces_beside_one_bare_handler(monkeypatch):
    """Given a bench whose bare handler traces nothing, when the warm rounds
    run, then each route is measured as deployed and with deep traces,
    sampled and not, in the same rounds, every ratio follows from the
    figures beside it, and the default-sampling figure is the default rule's
    mix of the last two."""
    from bench import server

    calls = []

    def fake_run(args, cwd, env=None):
        calls.append((args[0], env))
        if args[0] == "bare":
            return 0.0002
        if env is None:
            return 0.0003
        return 0.0006 if "_X_AMZN_TRACE_ID" not in env else 0.0004

    monkeypatch.setattr(server, "WARM_ROUNDS", 1)
    monkeypatch.setattr(server, "run", fake_run)
    results = server.warm_overheads(server.ROOT, OTEL)
    for route in server.FUNCTIONS:
        assert results[f"warm_bare_ms_{route}"] == 0.2
        assert (
            results[f"warm_overhead_ms_{route}_as_deployed"],
            results[f"warm_ratio_{route}_as_deployed"],
        ) == (
            0.3,
            1.5,
        )
        assert results[f"warm_ratio_{route}_opentelemetry"] == 3.0
        assert results[f"warm_ratio_{route}_opentelemetry_unsampled"] == 2.0
        assert results[f"warm_overhead_ms_{route}_opentelemetry_default_sampling"] == 0.41  # 5 % at 0.6
        assert results[f"warm_ratio_{route}_opentelemetry_default_sampling"] == 2.05
    for env in server.warm_variants(OTEL).values():
        assert calls.count(("warm", env)) == len(server.FUNCTIONS)
    assert "Sampled=0" in server.UNSAMPLED["_X_AMZN_TRACE_ID"]
    assert server.warm_variants(OTEL)["_opentelemetry_unsampled"] == OTEL | server.UNSAMPLED


def test_the_opentelemetry_environment_leaves_only_the_layers_own_instrumentations_on(tmp_path):
    """As the layer's wrapper does: every instrumentation the layer ships is
    disabled but botocore's and the HTTP clients' under it (aws-lambda's is
    started around the handler instead)."""
    from bench import server

    for name, entry in [("botocore", "botocore"), ("flask", "flask"), ("aws_lambda", "aws-lambda")]:
        dist = tmp_path / f"opentelemetry_instrumentation_{name}-0.65b0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: opentelemetry-instrumentation-{name}\n")
        (dist / "entry_points.txt").write_text(f"[opentelemetry_instrumentor]\n{entry} = x:Y\n")
    env = server.opentelemetry_environment(tmp_path)
    assert env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] == "aws-lambda,flask"
    assert env["BENCH_OPENTELEMETRY"] == str(tmp_path)
    assert (env["OTEL_PYTHON_DISTRO"], env["OTEL_PYTHON_CONFIGURATOR"]) == ("aws_distro", "aws_configurator")


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


def test_cached_next_before_takes_the_whole_cache_a_minute_and_drops_what_it_did_not_serve():
    """One environment, 0.2 requests/s for ten minutes, the policy before:
    a block of 1,000 per minute, about 988 of each dropped, none kept."""
    figures = cached_next.simulate(0.2, 1, "before", seconds=600)
    assert figures.block_requests == pytest.approx(10, abs=1)
    assert figures.served == pytest.approx(120, rel=0.3)
    taken = figures.block_requests * cached_next.CACHE
    # All it took, less what the last block still holds.
    assert taken - cached_next.CACHE <= figures.dropped + figures.served <= taken
    assert figures.kept == 0


def test_cached_next_now_skips_a_few_ids_and_keeps_what_no_one_wrote_after(monkeypatch):
    """The same arrivals with the policy now, through the service's own
    NextCache (every request goes through it): a handful of IDs dropped,
    about two writes a minute, an expired block kept now and then."""
    calls = []
    original = next_cache.NextCache.next_id

    def counted(self, name):
        calls.append(name)
        return original(self, name)

    monkeypatch.setattr(next_cache.NextCache, "next_id", counted)
    before = cached_next.simulate(0.2, 1, "before", seconds=600)
    calls.clear()
    now = cached_next.simulate(0.2, 1, "now", seconds=600)
    assert now.served == before.served == len(calls)
    assert now.dropped < 10
    assert now.block_requests <= 2 * 10 + 5
    assert now.average_held < 10
    per_day = now.per_day()
    assert per_day["ids_skipped_per_day"] < 0.05 * per_day["ids_served_per_day"]
