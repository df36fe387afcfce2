"""What taking IDs costs: the monthly AWS bill of a steady workload, by
service, from public list prices, for every way of taking IDs.

    python -m bench cost       (make bench runs all benchmarks)

Writes bench/results/cost.json (a flat object) and the table in docs/cost.md
(between its markers; tests/unit/test_cost_model.py checks the two agree).

THE MODEL

Prices: PRICES below, us-east-1 list prices (arm64 Lambda, on-demand
DynamoDB, API Gateway REST), each with the page it was read from and when
(PRICES_READ). No free tier, no savings plan: the bill of an account past
them. A month is 730 hours, as AWS's own pricing examples take it.

Workloads: IDs handed out at 10^3, 10^6 and 10^8 IDs/s, steadily, by each
WAY of taking them, with and without an Idempotency-Key, with the Tracing
parameter Active and Disabled. How many requests and writes a way needs
per ID comes from the project's own models, not from guesses:
  - `next`: one request and one counter write per ID;
  - cached `next` (cache 1,000): one request per ID, and the counter writes
    per ID that bench/scale.py measured for its busiest cached run
    (scale.json, next_cache_1000 at 10,000 callers): more than 1/1,000, as
    blocks expire after 60 s and every environment takes its own;
  - blocks through the client (a Sequence, library defaults): block requests
    per second as bench/scale.py measured them where it ran that rate
    (10^6 IDs/s: 100 clients; 10^8: 10,000 clients, its long window), else
    the client's sizing rule for one client, a block lasting the Sequence's
    runway (10^3 IDs/s: blocks of 5,000, 0.2 requests/s).
A keyed request writes two more items (Powertools' idempotency record: put
in progress, then completed) and makes two more DynamoDB calls.

Lambda: a request is billed its handler time plus its DynamoDB calls, each
the mean of bench/scale.py's lognormal latencies (handler 1 ms, a call 5 ms
median), plus half a millisecond for the rounding up to the next ms, at the
template's MemorySize. Cold starts are left out (one per environment, rare
in a steady workload).

Logs: what each request writes, measured (bench/log_bytes.py runs the real
handlers: the allocation record and the metrics' EMF line), plus Lambda's own
START, END and REPORT lines (REPORT_BYTES below; with Tracing Active the
REPORT carries an XRAY line too) and CloudWatch's 26 bytes per log event.
Ingestion is priced at the tiered rate for Lambda logs. Storage is not
priced: it depends on the retention (LogRetentionDays) and on compression;
cost.json gives the GB ingested per month.

X-Ray: the default sampling rule records the first request each second and
5 % of the others, with the Tracing parameter Active (the API stage and
Lambda record them; no SDK in the functions). Disabled records nothing: the
stage's TracingEnabled follows the parameter, so the line is 0.

Fixed each month whatever the load: the custom metrics the code emits (as
many as the dashboard plots of its namespace, which a test holds equal), the
dashboard and the alarms' metrics.

Not modelled: data transfer out (a response is about 100 bytes), DynamoDB
storage and backups of the counters (bytes) and of idempotency records,
Logs Insights queries, API keys and usage plans.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine_facts, write_results

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cost.md"
DOC_BEGIN = "<!-- cost table: written by python -m bench cost from bench/results/cost.json -->"
DOC_END = "<!-- end of cost table -->"

PRICES_READ = "2026-11-23"
REGION = "us-east-1"
SECONDS_PER_MONTH = 730 * 3600
INF = math.inf
GB = 1024**3
TB_IN_GB = 1024


@dataclass(frozen=True)
class Price:
    """USD per unit, by tier: ``tiers`` are (units in the tier, USD per
    unit), the last one unbounded; each month starts at the first tier."""

    def __post_init__(self) -> None:
        if not self.tiers or self.tiers[-1][0] != INF:
            raise ValueError("the last tier must be unbounded: units past it would be free")

    unit: str
    tiers: tuple[tuple[float, float], ...]
    source: str

    def monthly(self, units: float) -> float:
        total, left = 0.0, units
        for size, usd in self.tiers:
            taken = min(left, size)
            total += taken * usd
            left -= taken
            if left <= 0:
                break
        return total


PRICES: dict[str, Price] = {
    "api_gateway_rest_request": Price(
        "request",
        ((333e6, 3.50e-6), (667e6, 2.80e-6), (19e9, 2.38e-6), (INF, 1.51e-6)),
        "https://aws.amazon.com/api-gateway/pricing/",
    ),
    "lambda_request": Price("request", ((INF, 0.20e-6),), "https://aws.amazon.com/lambda/pricing/"),
    "lambda_arm64_gb_second": Price(
        "GB-second",
        ((7.5e9, 0.0000133334), (11.25e9, 0.0000120001), (INF, 0.0000106667)),
        "https://aws.amazon.com/lambda/pricing/",
    ),
    "dynamodb_on_demand_write_request_unit": Price(
        "write request unit (an item up to 1 KB)",
        ((INF, 0.625e-6),),
        "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ),
    # Lambda's logs are billed in tiers since May 2025 (the page's "vended
    # logs"); checked against duckbillgroup.com's worked example (60 TB a
    # month: $12,500).
    "cloudwatch_logs_lambda_ingestion_gb": Price(
        "GB ingested (Lambda logs, Standard class)",
        ((10 * TB_IN_GB, 0.50), (20 * TB_IN_GB, 0.25), (20 * TB_IN_GB, 0.10), (INF, 0.05)),
        "https://aws.amazon.com/cloudwatch/pricing/",
    ),
    # The first 10,000 metrics' price; the stack emits fewer than ten.
    "cloudwatch_custom_metric_month": Price(
        "metric-month", ((INF, 0.30),), "https://aws.amazon.com/cloudwatch/pricing/"
    ),
    "cloudwatch_dashboard_month": Price(
        "dashboard-month", ((INF, 3.00),), "https://aws.amazon.com/cloudwatch/pricing/"
    ),
    "cloudwatch_alarm_metric_month": Price(
        "standard-resolution alarm metric-month", ((INF, 0.10),), "https://aws.amazon.com/cloudwatch/pricing/"
    ),
    "xray_trace_recorded": Price("trace recorded", ((INF, 5.00e-6),), "https://aws.amazon.com/xray/pricing/"),
}

# X-Ray's default sampling rule: a reservoir of one request a second, then a
# fixed rate of the rest (https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html).
XRAY_RESERVOIR_PER_SECOND = 1.0
XRAY_FIXED_RATE = 0.05

# Lambda's own lines per invocation, in its text log format: START (request
# id, version), END, and REPORT (durations, memory); with Tracing Active the
# REPORT carries "XRAY TraceId: ... SegmentId: ... Sampled: true" as well.
# Sizes of those lines as Lambda writes them, with a 36-character request id.
PLATFORM_LINES = 3
REPORT_BYTES = 60 + 52 + 140
XRAY_REPORT_BYTES = 80
# With a trace header, the Logger adds the trace id to every line it writes.
XRAY_LOGGER_FIELD_BYTES = len(',"xray_trace_id":"1-5759e988-bd862e3fe1be46a994272793"')
# What CloudWatch Logs bills per log event beyond its message.
EVENT_OVERHEAD_BYTES = 26
# An idempotency record: put as in progress, then updated as completed.
IDEMPOTENCY_WRITES = 2
IDEMPOTENCY_CALLS = 2

RATES = (1_000, 1_000_000, 100_000_000)
ONE_ITEM_WRITES_PER_SECOND = 1_000  # what one counter takes (README, bench/scale.py)
DEFAULT_API_REQUESTS_PER_SECOND = 10_000  # API Gateway's account quota, by default
DEFAULT_CONCURRENCY = 1_000  # Lambda's regional quota, by default


@dataclass(frozen=True)
class Way:
    name: str
    label: str
    log_kind: str  # bench/log_bytes.py's kind
    keyed_by_default: bool = False


WAYS = (
    Way("next", "`next`", "next"),
    Way("next_cache_1000", "cached `next` (cache 1,000)", "next_from_cache"),
    Way("client_blocks", "blocks through the client", "batch", keyed_by_default=True),
)


@dataclass(frozen=True)
class Usage:
    """What one workload uses in a month, and where the figures came from."""

    ids_per_second: float
    requests_per_second: float
    counter_writes_per_second: float
    dynamodb_calls_per_request: float
    keyed: bool
    log_bytes_per_request: float
    log_events_per_request: float
    basis: str
    traced: bool = True


@dataclass(frozen=True)
class Inputs:
    """The figures the model takes from the project's other models."""

    scale: dict[str, Any]  # bench/results/scale.json
    log: dict[str, float]  # bench/log_bytes.py's measurements
    memory_gb: float  # the functions' MemorySize
    fixed_custom_metrics: int
    fixed_alarm_metrics: int
    fixed_dashboards: int


def lognormal_mean_ms(median_s: float, sigma: float) -> float:
    return median_s * 1000 * math.exp(sigma**2 / 2)


def request_ms(inputs: Inputs, dynamodb_calls: float) -> float:
    """Billed milliseconds of one request: the handler and its DynamoDB
    calls, each its mean, plus half a ms for Lambda's rounding up."""
    model = inputs.scale
    handler = lognormal_mean_ms(model["model.handler_median_ms"] / 1000, model["model.handler_sigma"])
    call = lognormal_mean_ms(model["model.dynamodb_median_ms"] / 1000, model["model.dynamodb_sigma"])
    return handler + dynamodb_calls * call + 0.5


def usage(inputs: Inputs, way: Way, rate: float, keyed: bool, tracing: bool) -> Usage:
    scale = inputs.scale
    if way.name == "next":
        requests, writes_per_request = rate, 1.0
        basis = "one request and one write per ID"
    elif way.name == "next_cache_1000":
        run = "next_cache_1000.10000"
        writes_per_id = scale[f"{run}.item_writes_per_s"] / scale[f"{run}.ids_per_s"]
        requests, writes_per_request = rate, writes_per_id
        basis = f"one request per ID; {writes_per_id:.6f} writes per ID (scale.json {run})"
    else:
        run = {1_000_000: "client_adaptive.100", 100_000_000: "client_adaptive.10000.long"}.get(int(rate))
        if run is not None and scale[f"{run}.ids_per_s"] == rate:
            requests = scale[f"{run}.item_writes_per_s"]
            basis = f"{requests:g} block requests/s (scale.json {run})"
        else:
            runway = scale["model.sequence_runway"]
            smallest, largest = scale["model.sequence_min_block"], scale["model.sequence_max_block"]
            block = min(max(rate * runway, smallest), largest)
            requests = rate / block
            basis = f"one client, blocks of {block:g} ({runway:g} s runway): {requests:g} requests/s"
        writes_per_request = 1.0
    kind = way.log_kind + ("_keyed" if keyed else "")
    log_bytes = inputs.log[f"{kind}.bytes"]
    app_lines = inputs.log[f"{kind}.lines"]
    if tracing:
        log_bytes += app_lines * XRAY_LOGGER_FIELD_BYTES + XRAY_REPORT_BYTES
    else:
        # Lambda still gives each invocation a trace header: the Logger still adds its id.
        log_bytes += app_lines * XRAY_LOGGER_FIELD_BYTES
    events = app_lines + PLATFORM_LINES
    log_bytes += REPORT_BYTES + events * EVENT_OVERHEAD_BYTES
    calls = writes_per_request + (IDEMPOTENCY_CALLS if keyed else 0)
    return Usage(
        ids_per_second=rate,
        requests_per_second=requests,
        counter_writes_per_second=requests * writes_per_request,
        dynamodb_calls_per_request=calls,
        keyed=keyed,
        log_bytes_per_request=log_bytes,
        log_events_per_request=events,
        basis=basis,
        traced=tracing,
    )


def xray_traces_per_second(requests_per_second: float) -> float:
    reservoir = min(requests_per_second, XRAY_RESERVOIR_PER_SECOND)
    return reservoir + XRAY_FIXED_RATE * (requests_per_second - reservoir)


def fixed_monthly(inputs: Inputs) -> dict[str, float]:
    return {
        "cloudwatch_metrics_dashboard_alarms": (
            PRICES["cloudwatch_custom_metric_month"].monthly(inputs.fixed_custom_metrics)
            + PRICES["cloudwatch_dashboard_month"].monthly(inputs.fixed_dashboards)
            + PRICES["cloudwatch_alarm_metric_month"].monthly(inputs.fixed_alarm_metrics)
        )
    }


def monthly_bill(inputs: Inputs, use: Usage) -> dict[str, float]:
    """USD a month, by line."""
    requests = use.requests_per_second * SECONDS_PER_MONTH
    gb_seconds = requests * request_ms(inputs, use.dynamodb_calls_per_request) / 1000 * inputs.memory_gb
    writes = use.counter_writes_per_second * SECONDS_PER_MONTH
    if use.keyed:
        writes += IDEMPOTENCY_WRITES * requests
    return {
        "api_gateway": PRICES["api_gateway_rest_request"].monthly(requests),
        "lambda": PRICES["lambda_request"].monthly(requests)
        + PRICES["lambda_arm64_gb_second"].monthly(gb_seconds),
        "dynamodb": PRICES["dynamodb_on_demand_write_request_unit"].monthly(writes),
        "cloudwatch_logs": PRICES["cloudwatch_logs_lambda_ingestion_gb"].monthly(
            requests * use.log_bytes_per_request / GB
        ),
        "xray": PRICES["xray_trace_recorded"].monthly(
            xray_traces_per_second(use.requests_per_second) * SECONDS_PER_MONTH if use.traced else 0
        ),
    } | fixed_monthly(inputs)


def workloads() -> list[tuple[Way, int, bool, bool]]:
    return [
        (way, rate, keyed, tracing)
        for way in WAYS
        for rate in RATES
        for keyed in (True, False)
        for tracing in (True, False)
    ]


def workload_key(way: Way, rate: int, keyed: bool, tracing: bool) -> str:
    key = "keyed" if keyed else "unkeyed"
    return f"{way.name}.{rate:.0e}.{key}.{'tracing_on' if tracing else 'tracing_off'}"


def run_model(inputs: Inputs) -> dict[str, Any]:
    """Every workload's bill by line, its total, per 10^6 IDs, the line
    that dominates, and what it asks of the quotas; flat, as cost.json."""
    out: dict[str, Any] = {}
    for way, rate, keyed, tracing in workloads():
        key = workload_key(way, rate, keyed, tracing)
        use = usage(inputs, way, rate, keyed, tracing)
        bill = monthly_bill(inputs, use)
        total = sum(bill.values())
        ids = rate * SECONDS_PER_MONTH
        for line, usd in bill.items():
            out[f"{key}.usd_month.{line}"] = round(usd, 2)
        out[f"{key}.usd_month.total"] = round(total, 2)
        out[f"{key}.usd_per_million_ids"] = float(f"{total / ids * 1e6:.4g}")
        out[f"{key}.dominant"] = max(bill, key=bill.__getitem__)
        out[f"{key}.requests_per_s"] = round(use.requests_per_second, 4)
        out[f"{key}.counter_writes_per_s"] = round(use.counter_writes_per_second, 4)
        counters = math.ceil(use.counter_writes_per_second / ONE_ITEM_WRITES_PER_SECOND)
        out[f"{key}.counters_needed"] = max(1, counters)
        out[f"{key}.concurrency"] = round(
            use.requests_per_second * request_ms(inputs, use.dynamodb_calls_per_request) / 1000, 1
        )
        log_bytes = use.requests_per_second * SECONDS_PER_MONTH * use.log_bytes_per_request
        out[f"{key}.log_gb_month"] = round(log_bytes / GB, 3)
        out[f"{key}.basis"] = use.basis
    return out


def model_facts(inputs: Inputs) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "prices_read": PRICES_READ,
        "region": REGION,
        "seconds_per_month": SECONDS_PER_MONTH,
        "model.memory_gb": inputs.memory_gb,
        "model.fixed_custom_metrics": inputs.fixed_custom_metrics,
        "model.fixed_alarm_metrics": inputs.fixed_alarm_metrics,
        "model.fixed_dashboards": inputs.fixed_dashboards,
        "model.scale_measured_at": inputs.scale["measured_at"],
        "model.xray_reservoir_per_s": XRAY_RESERVOIR_PER_SECOND,
        "model.xray_fixed_rate": XRAY_FIXED_RATE,
        "model.report_bytes": REPORT_BYTES,
        "model.xray_report_bytes": XRAY_REPORT_BYTES,
        "model.event_overhead_bytes": EVENT_OVERHEAD_BYTES,
    }
    for name, price in PRICES.items():
        facts[f"price.{name}.tiers"] = json.dumps(price.tiers)
        facts[f"price.{name}.source"] = price.source
    for name, value in inputs.log.items():
        facts[f"log.{name}"] = value
    for key in ("handler_median_ms", "handler_sigma", "dynamodb_median_ms", "dynamodb_sigma"):
        facts[f"model.{key}"] = inputs.scale[f"model.{key}"]
    return facts


# -- inputs from the project --------------------------------------------------


def template_inputs() -> dict[str, Any]:
    """MemorySize, and the fixed monthly items, from template.yaml."""
    from localrun.template import default_template

    template = default_template()
    memory_mb = template.raw["Globals"]["Function"]["MemorySize"]
    alarm_metrics = 0
    for alarm in template.of_type("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        alarm_metrics += 1 if "MetricName" in props else sum("MetricStat" in m for m in props["Metrics"])
    body = template.resources["Dashboard"]["Properties"]["DashboardBody"]
    body = body["Fn::Sub"] if isinstance(body, dict) else body
    body = body[0] if isinstance(body, list) else body  # the text of an Fn::Sub with variables
    variables = template.raw["Globals"]["Function"]["Environment"]["Variables"]
    namespace = variables["POWERTOOLS_METRICS_NAMESPACE"]
    custom = {
        json.dumps(line[:-1])
        for widget in json.loads(body)["widgets"]
        for line in widget["properties"].get("metrics", [])
        if line[0] == namespace
    }
    return {
        "memory_gb": memory_mb / 1024,
        "fixed_custom_metrics": len(custom),
        "fixed_alarm_metrics": alarm_metrics,
        "fixed_dashboards": len(template.of_type("AWS::CloudWatch::Dashboard")),
    }


def measured_log_bytes() -> dict[str, float]:
    """bench/log_bytes.py, in a fresh interpreter: its last line."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.log_bytes"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_inputs(log: dict[str, float] | None = None) -> Inputs:
    scale = json.loads((RESULTS / "scale.json").read_text())
    return Inputs(scale=scale, log=measured_log_bytes() if log is None else log, **template_inputs())


# -- the docs page ------------------------------------------------------------

LINE_NAMES = {
    "api_gateway": "API Gateway",
    "lambda": "Lambda",
    "dynamodb": "DynamoDB",
    "cloudwatch_logs": "CloudWatch Logs",
    "xray": "X-Ray",
    "cloudwatch_metrics_dashboard_alarms": "CloudWatch metrics, dashboard, alarms",
}


def _usd(value: float) -> str:
    """Dollars, to the cent above a dollar; below, to two significant digits."""
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    if value == 0:
        return "$0"
    return f"${value:.{max(2, 1 - math.floor(math.log10(value)))}f}"


def doc_table(results: dict[str, Any]) -> str:
    """The docs' table, from cost.json's figures alone."""
    rows = [
        f"Prices: {results['region']} list prices read on {results['prices_read']}; "
        f"Tracing Active; a month of 730 hours. Cost per 10^6 IDs, and the line that dominates.",
        "",
        "| way of taking IDs | key | 10^3 IDs/s | 10^6 IDs/s | 10^8 IDs/s |",
        "|---|---|---|---|---|",
    ]
    for way in WAYS:
        for keyed in (way.keyed_by_default, not way.keyed_by_default):
            cells = []
            for rate in RATES:
                key = workload_key(way, rate, keyed, True)
                dominant = LINE_NAMES[results[f"{key}.dominant"]]
                cells.append(f"{_usd(results[f'{key}.usd_per_million_ids'])} ({dominant})")
            label = way.label
            if keyed != way.keyed_by_default:
                label += ", with key" if keyed else ", no key"
            rows.append(f"| {label} | {'yes' if keyed else 'no'} | " + " | ".join(cells) + " |")
    rows += [
        "",
        "Bytes each request writes to its log (measured by bench/log_bytes.py, Lambda's own lines and"
        " CloudWatch's per-event bytes not included), and of them the allocation record's:",
        "",
        "| request | bytes | allocation record |",
        "|---|---|---|",
    ]
    kinds = sorted({k.removeprefix("log.").rsplit(".", 1)[0] for k in results if k.startswith("log.")})
    for kind in kinds:
        measured, record = results[f"log.{kind}.bytes"], results[f"log.{kind}.record_bytes"]
        rows.append(f"| {kind} | {measured:,.0f} | {record:,.0f} |")
    rows += [
        "",
        "Monthly bill by service, Tracing Active (Disabled in brackets where it differs):",
        "",
        "| way, key, IDs/s | API Gateway | Lambda | DynamoDB | CloudWatch Logs | X-Ray | fixed | total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for way in WAYS:
        for keyed in (way.keyed_by_default, not way.keyed_by_default):
            for rate in RATES:
                on, off = (workload_key(way, rate, keyed, tracing) for tracing in (True, False))
                cells = []
                for line in (*LINE_NAMES, "total"):
                    value_on = results[f"{on}.usd_month.{line}"]
                    value_off = results[f"{off}.usd_month.{line}"]
                    cell = _usd(value_on)
                    if value_off != value_on:
                        cell += f" ({_usd(value_off)})"
                    cells.append(cell)
                rows.append(
                    f"| {way.label}, {'key' if keyed else 'no key'}, 10^{round(math.log10(rate))} | "
                    + " | ".join(cells)
                    + " |"
                )
    rows += ["", "Prices (USD; tiers are a month's units at each price, from the first):", ""]
    rows += ["| price | tiers | source |", "|---|---|---|"]
    for name, price in PRICES.items():
        tiers = json.loads(results[f"price.{name}.tiers"])
        text = "; ".join(
            f"{usd:g} per {price.unit}" + ("" if size >= INF else f" (the next {size:,.0f})")
            for size, usd in tiers
        )
        rows.append(f"| {name} | {text} | {results[f'price.{name}.source']} |")
    return "\n".join(rows)


def write_doc_table(results: dict[str, Any], doc: Path = DOC) -> None:
    text = doc.read_text()
    before, rest = text.split(DOC_BEGIN, 1)
    _, after = rest.split(DOC_END, 1)
    doc.write_text(f"{before}{DOC_BEGIN}\n{doc_table(results)}\n{DOC_END}{after}")
    print(f"wrote {doc.relative_to(ROOT)}", flush=True)


def doc_table_in(doc: Path = DOC) -> str:
    match = re.search(re.escape(DOC_BEGIN) + r"\n(.*)\n" + re.escape(DOC_END), doc.read_text(), re.S)
    assert match, f"{doc} has no cost table markers"
    return match.group(1)


def main() -> dict[str, Any]:
    print("cost: measuring log bytes per request ...", flush=True)
    inputs = load_inputs()
    results = dict(machine_facts()) | model_facts(inputs) | run_model(inputs)
    write_results("cost", results)
    write_doc_table(results)
    return results


if __name__ == "__main__":
    main()
