"""The time a request spends in DynamoDB, without a tracing SDK: the
DynamoDbLatency metric of its route (p50/p99 on the dashboard) and the
allocation record's dynamodb_calls and dynamodb_ms, on every way of taking
IDs that makes a DynamoDB call, and on a request that fails after making one.

Each DynamoDB call is made to take exactly CALL_MS on a clock of the test's
own (botocore's one entry for every operation advances it), so the figures
are exact: what is counted is the calls' time and nothing else."""

from __future__ import annotations

import json
import time

import pytest
from botocore.stub import Stubber

from idblocks_core.core import core
from idblocks_core.dal import dynamodb as dynamodb_calls
from idblocks_core.logic.allocation import ALLOCATION_RECORD
from tests.unit.test_replay import expire_key_records

CALL_MS = 7.0
KEY = {"Idempotency-Key": "order-run-1"}


@pytest.fixture
def clock(monkeypatch):
    """A clock that only a DynamoDB call (CALL_MS) or a backoff sleep moves."""
    now = [1000.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


@pytest.fixture
def timed(api, clock, monkeypatch):
    """The counter "orders" exists, and every DynamoDB call the core's
    client makes takes CALL_MS."""
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    client = core().store.client
    make_api_call = client._make_api_call  # white-box: botocore's one path for every operation

    def slow(operation, params):
        clock[0] += CALL_MS / 1000
        return make_api_call(operation, params)

    monkeypatch.setattr(client, "_make_api_call", slow)
    return api


@pytest.fixture
def observed(capsys, logged):
    """Calling it returns (the DynamoDbLatency values by route, the
    allocation records) written since the last call."""

    def read() -> tuple[list[tuple[str, float]], list[dict]]:
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        latency = []
        for line in lines:
            if "_aws" not in line or "DynamoDbLatency" not in line:
                continue
            [directive] = line["_aws"]["CloudWatchMetrics"]
            units = {metric["Name"]: metric.get("Unit") for metric in directive["Metrics"]}
            assert units["DynamoDbLatency"] == "Milliseconds"
            assert [sorted(d) for d in directive["Dimensions"]] == [["route", "service"]]
            [value] = line["DynamoDbLatency"]  # one value per request
            latency.append((line["route"], value))
        return latency, [r for r in logged() if r.get("message") == ALLOCATION_RECORD]

    return read


def test_next_reports_its_one_write(timed, observed):
    observed()
    assert timed.call("next-post", name="orders").status == 200
    latency, [record] = observed()
    assert latency == [("next", CALL_MS)]
    assert (record["dynamodb_calls"], record["dynamodb_ms"]) == (1, CALL_MS)


def test_batch_reports_its_one_write(timed, observed):
    observed()
    assert timed.call("batch", name="orders", body={"count": 10}).status == 200
    latency, [record] = observed()
    assert latency == [("batch", CALL_MS)]
    assert (record["dynamodb_calls"], record["dynamodb_ms"]) == (1, CALL_MS)


def test_cached_next_reports_the_block_it_writes_and_nothing_from_memory(timed, observed):
    """Given a counter with cache 5: the second next writes a block (a call,
    reported; the first wrote a block of one), the third is served from
    memory (no call: no metric, and a record that says none)."""
    assert timed.call("admin-create", body={"name": "members", "cache": 5}).status == 201
    assert timed.call("next-post", name="members").status == 200
    observed()
    assert timed.call("next-post", name="members").status == 200
    latency, [record] = observed()
    assert latency == [("next", CALL_MS)]
    assert (record["served_from"], record["dynamodb_calls"], record["dynamodb_ms"]) == ("write", 1, CALL_MS)
    assert timed.call("next-post", name="members").status == 200
    latency, [record] = observed()
    assert latency == []
    assert (record["served_from"], record["dynamodb_calls"], record["dynamodb_ms"]) == ("memory", 0, 0.0)


def test_a_new_counter_reports_the_create_and_the_retried_write(timed, observed):
    """An unknown counter: the refused write, the create, the write again."""
    observed()
    assert timed.call("batch", name="fresh", body={"count": 2}).status == 200
    latency, [record] = observed()
    assert latency == [("batch", 3 * CALL_MS)]
    assert (record["dynamodb_calls"], record["dynamodb_ms"]) == (3, 3 * CALL_MS)


@pytest.mark.parametrize("event", ["batch", "next-post"])
def test_a_keyed_request_and_its_replay_report_the_idempotency_records_calls_too(timed, observed, event):
    """A keyed request: the record put in progress, the counter's write, the
    record completed. Its replay: the one call that finds the record (the
    put, refused, returns it)."""
    body = {"count": 4} if event == "batch" else None
    route = event.removesuffix("-post")
    observed()
    assert timed.call(event, name="orders", body=body, headers=KEY).status == 200
    latency, [record] = observed()
    assert latency == [(route, 3 * CALL_MS)]
    assert (record["dynamodb_calls"], record["dynamodb_ms"]) == (3, 3 * CALL_MS)
    assert timed.call(event, name="orders", body=body, headers=KEY).status == 200
    latency, [record] = observed()
    assert record["served_from"] == "idempotency_record"
    assert latency == [(route, record["dynamodb_ms"])]
    assert record["dynamodb_calls"] == 1
    assert record["dynamodb_ms"] == record["dynamodb_calls"] * CALL_MS


def test_a_retry_that_finds_its_own_committed_write_reports_it(timed, observed, dynamodb):
    """The key record expired but the write carries the request's token: the
    retry's write is refused, and its answer read from the refusal."""
    assert timed.call("batch", name="orders", body={"count": 5}, headers=KEY).status == 200
    expire_key_records(dynamodb)
    observed()
    assert timed.call("batch", name="orders", body={"count": 5}, headers=KEY).status == 200
    latency, [record] = observed()
    assert (record["replayed"], record["served_from"]) == (True, "write")
    assert latency == [("batch", record["dynamodb_ms"])]
    assert record["dynamodb_ms"] == record["dynamodb_calls"] * CALL_MS == 3 * CALL_MS


def test_a_request_that_fails_after_retrying_reports_its_time_with_the_backoff(
    timed, observed, clock, monkeypatch
):
    """Throttled on every attempt: no IDs and no record, but the metric, with
    every attempt and the backoff between them, which is where a slow
    request's time went. The backoff's jitter takes its longest draw, so the
    time is exact."""
    monkeypatch.setattr(dynamodb_calls._JITTER, "uniform", lambda low, high: high)
    observed()
    started = clock[0]
    with Stubber(core().store.client) as stub:
        for _ in range(dynamodb_calls.THROTTLED_ATTEMPTS):
            stub.add_client_error("update_item", service_error_code="ThrottlingException")
        assert timed.call("batch", name="orders", body={"count": 1}).status == 503
        stub.assert_no_pending_responses()
    latency, records = observed()
    assert records == []
    backoff_ms = sum(
        dynamodb_calls.THROTTLING_BACKOFF_BASE_SECONDS * 2 ** (n - 1)
        for n in range(1, dynamodb_calls.THROTTLED_ATTEMPTS)
    )
    assert latency == [("batch", round(dynamodb_calls.THROTTLED_ATTEMPTS * CALL_MS + backoff_ms * 1000, 3))]
    assert latency == [("batch", round((clock[0] - started) * 1000, 3))]


def test_a_request_refused_before_any_call_reports_nothing(timed, observed):
    observed()
    assert timed.call("batch", name="orders", body={"count": 0}).status == 400
    assert observed() == ([], [])
