"""The cost model's arithmetic (bench/cost.py), and docs/cost.md's table
against bench/results/cost.json, the run it quotes."""

from __future__ import annotations

import json
import math

import pytest

from bench import cost
from bench.common import RESULTS

MONTH = 730 * 3600
SCALE = json.loads((RESULTS / "scale.json").read_text())
# Measured log bytes, fixed here so the arithmetic below is the test's own.
LOG = {
    f"{kind}{suffix}.{field}": value
    for kind in ("next", "next_from_cache", "batch")
    for suffix in ("", "_keyed")
    for field, value in (("bytes", 1000.0), ("lines", 2.0), ("record_bytes", 600.0))
}


def inputs(**overrides) -> cost.Inputs:
    return cost.Inputs(
        **{
            "scale": SCALE,
            "log": LOG,
            "memory_gb": 0.5,
            "fixed_custom_metrics": 8,
            "fixed_alarm_metrics": 8,
            "fixed_dashboards": 1,
        }
        | overrides
    )


WAY = {way.name: way for way in cost.WAYS}


def test_a_tiered_price_charges_each_tier_its_own_rate():
    """400 million REST calls: 333 million at $3.50 per million, the other
    67 million at $2.80."""
    api = cost.PRICES["api_gateway_rest_request"]
    assert api.monthly(400e6) == pytest.approx(333 * 3.50 + 67 * 2.80)
    assert api.monthly(0) == 0
    assert api.monthly(100e9) == pytest.approx(333 * 3.5 + 667 * 2.8 + 19_000 * 2.38 + 80_000 * 1.51)


def test_a_price_without_an_unbounded_last_tier_is_refused():
    with pytest.raises(ValueError, match="unbounded"):
        cost.Price("thing", ((10.0, 1.0),), "https://example.com")


@pytest.mark.parametrize(("requests", "traces"), [(0, 0), (0.5, 0.5), (1, 1), (101, 6), (10_001, 501)])
def test_xray_records_one_request_a_second_and_five_percent_of_the_rest(requests, traces):
    assert cost.xray_traces_per_second(requests) == pytest.approx(traces)


def test_next_at_a_thousand_ids_a_second_line_by_line():
    """Given next without a key at 10^3 IDs/s, Tracing Active: every line
    worked out by hand from the prices and the model's inputs."""
    use = cost.usage(inputs(), WAY["next"], 1_000, keyed=False, tracing=True)
    bill = cost.monthly_bill(inputs(), use)
    requests = 1_000 * MONTH  # 2.628e9: into API Gateway's third tier
    assert bill["api_gateway"] == pytest.approx(333 * 3.5 + 667 * 2.8 + (requests - 1e9) / 1e6 * 2.38)
    handler_ms = 1.0 * math.exp(0.3**2 / 2)
    call_ms = 5.0 * math.exp(0.5**2 / 2)
    gb_seconds = requests * (handler_ms + call_ms + 0.5) / 1000 * 0.5
    assert bill["lambda"] == pytest.approx(requests * 0.2e-6 + gb_seconds * 0.0000133334)
    assert bill["dynamodb"] == pytest.approx(requests * 0.625e-6)
    log_bytes = 1000 + 2 * cost.XRAY_LOGGER_FIELD_BYTES + cost.XRAY_REPORT_BYTES + cost.REPORT_BYTES + 5 * 26
    assert bill["cloudwatch_logs"] == pytest.approx(requests * log_bytes / 1024**3 * 0.50)
    assert bill["xray"] == pytest.approx((1 + 0.05 * 999) * MONTH * 5e-6)
    assert bill["cloudwatch_metrics_dashboard_alarms"] == pytest.approx(8 * 0.30 + 3.00 + 8 * 0.10)


def test_a_key_adds_two_writes_and_two_calls_per_request():
    plain = cost.usage(inputs(), WAY["next"], 1_000, keyed=False, tracing=True)
    keyed = cost.usage(inputs(), WAY["next"], 1_000, keyed=True, tracing=True)
    assert (plain.dynamodb_calls_per_request, keyed.dynamodb_calls_per_request) == (1, 3)
    bills = [cost.monthly_bill(inputs(), use)["dynamodb"] for use in (plain, keyed)]
    assert bills[1] == pytest.approx(3 * bills[0])


def test_tracing_disabled_drops_the_reports_xray_line_and_the_xray_bill():
    """Tracing Disabled turns the stage's tracing off too (template.yaml):
    nothing is recorded, so X-Ray bills nothing; every other line stays."""
    on, off = (cost.usage(inputs(), WAY["next"], 1_000, keyed=False, tracing=t) for t in (True, False))
    assert on.log_bytes_per_request - off.log_bytes_per_request == cost.XRAY_REPORT_BYTES
    bills = [cost.monthly_bill(inputs(), use) for use in (on, off)]
    assert bills[0]["xray"] > 0
    assert bills[1]["xray"] == 0
    assert bills[0]["lambda"] == bills[1]["lambda"]


def test_cached_next_writes_per_id_as_the_scale_run_measured():
    use = cost.usage(inputs(), WAY["next_cache_1000"], 1_000_000, keyed=False, tracing=True)
    run = "next_cache_1000.10000"
    assert use.requests_per_second == 1_000_000
    assert use.counter_writes_per_second == pytest.approx(
        1_000_000 * SCALE[f"{run}.item_writes_per_s"] / SCALE[f"{run}.ids_per_s"]
    )


def test_client_blocks_come_from_the_scale_runs_or_the_clients_sizing_rule():
    """10^6 and 10^8 IDs/s: the block requests scale.json measured; 10^3:
    one client, a block lasting its runway (5 s: blocks of 5,000)."""
    way = WAY["client_blocks"]
    assert (
        cost.usage(inputs(), way, 1_000_000, True, True).requests_per_second
        == SCALE["client_adaptive.100.item_writes_per_s"]
    )
    assert (
        cost.usage(inputs(), way, 100_000_000, True, True).requests_per_second
        == SCALE["client_adaptive.10000.long.item_writes_per_s"]
    )
    assert cost.usage(inputs(), way, 1_000, True, True).requests_per_second == pytest.approx(
        1_000 / (1_000 * SCALE["model.sequence_runway"])
    )


def test_each_workload_has_every_line_a_total_and_what_dominates():
    results = cost.run_model(inputs())
    for way, rate, keyed, tracing in cost.workloads():
        key = cost.workload_key(way, rate, keyed, tracing)
        lines = {line: results[f"{key}.usd_month.{line}"] for line in cost.LINE_NAMES}
        assert results[f"{key}.usd_month.total"] == pytest.approx(sum(lines.values()), abs=0.05)
        assert lines[results[f"{key}.dominant"]] == max(lines.values())
        per_million = results[f"{key}.usd_month.total"] / (rate * MONTH) * 1e6
        assert results[f"{key}.usd_per_million_ids"] == pytest.approx(per_million, rel=1e-3)


# -- the recorded run and the page that quotes it -----------------------------

RECORDED = json.loads((RESULTS / "cost.json").read_text())


def test_the_docs_table_is_the_one_cost_json_makes():
    assert cost.doc_table_in() == cost.doc_table(RECORDED)


def test_cost_json_was_made_with_the_prices_in_the_code():
    assert RECORDED["prices_read"] == cost.PRICES_READ
    for name, price in cost.PRICES.items():
        assert json.loads(RECORDED[f"price.{name}.tiers"]) == [list(tier) for tier in price.tiers]
        assert RECORDED[f"price.{name}.source"] == price.source


def test_the_recorded_run_says_what_a_key_and_a_block_change():
    """At 10^6 IDs/s: unkeyed next is mostly API Gateway; a key makes
    DynamoDB (three writes per ID) the largest line; blocks through the
    client cost thousands of times less per ID than next."""

    def recorded(way, keyed, field):
        return RECORDED[f"{cost.workload_key(WAY[way], 1_000_000, keyed, True)}.{field}"]

    assert recorded("next", False, "dominant") == "api_gateway"
    assert recorded("next", True, "dominant") == "dynamodb"
    assert recorded("next", False, "usd_per_million_ids") > 1_000 * recorded(
        "client_blocks", True, "usd_per_million_ids"
    )
