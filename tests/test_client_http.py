"""HttpBackend: retries, Idempotency-Key, error mapping and auth, against a
scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket

import pytest

from idblocks import (
    ApiKeyAuth,
    AuthError,
    Conflict,
    CounterExhausted,
    CounterNotFound,
    HttpBackend,
    IamAuth,
    InvalidRequest,
    RetryPolicy,
    ServiceUnavailable,
)
from idblocks.backend import Block
from tests.support.stub_http import DROP, StubServer

BLOCK = (200, {}, {"counter": "orders", "start": 101, "end": 200, "count": 100})


def error(status, code, headers=None):
    return (status, headers or {}, {"error": {"code": code, "message": f"{code} happened"}})


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


def policy(**kwargs):
    sleeps = Sleeps()
    return RetryPolicy(sleep=sleeps, **kwargs), sleeps


def test_allocate_sends_count_and_a_key_and_returns_the_block():
    with StubServer([BLOCK]) as stub:
        block = HttpBackend(stub.url).allocate("orders", 100, idempotency_key="k1")
    assert block == Block(101, 200)
    (request,) = stub.requests
    assert (request["method"], request["path"]) == ("POST", "/counters/orders/batch")
    assert json.loads(request["body"]) == {"count": 100}
    assert request["headers"]["Idempotency-Key"] == "k1"


def test_names_are_url_encoded():
    with StubServer([BLOCK]) as stub:
        HttpBackend(stub.url + "/v1/").allocate("a.b-c_d", 1)
    assert stub.requests[0]["path"] == "/v1/counters/a.b-c_d/batch"


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_throttling_and_outages_are_retried_with_the_same_key(status):
    retry, sleeps = policy()
    with StubServer([error(status, "busy"), error(status, "busy"), BLOCK]) as stub:
        block = HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert block == Block(101, 200)
    keys = {r["headers"]["Idempotency-Key"] for r in stub.requests}
    assert len(stub.requests) == 3
    assert len(keys) == 1  # one request, tried three times
    assert len(sleeps) == 2


def test_a_duplicate_still_in_progress_is_retried():
    retry, sleeps = policy()
    busy = error(409, "request_in_progress", {"Retry-After": "1"})
    with StubServer([busy, BLOCK]) as stub:
        assert HttpBackend(stub.url, retry=retry).allocate("orders", 100) == Block(101, 200)
    assert sleeps[0] >= 1


def test_retry_after_is_honoured():
    retry, sleeps = policy(base=0.001)
    with StubServer([error(503, "service_unavailable", {"Retry-After": "2"}), BLOCK]) as stub:
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert sleeps[0] >= 2


def test_backoff_is_jittered_and_capped():
    retry = RetryPolicy(base=0.1, cap=1.0)
    waits = [retry.delay(k) for k in range(1, 12) for _ in range(20)]
    assert all(0 <= w <= 1.0 for w in waits)
    assert len(set(waits)) > 100  # jitter: no two clients retry in step


def test_a_lost_response_is_retried_with_the_same_key():
    retry, _ = policy()
    with StubServer([DROP, BLOCK]) as stub:
        block = HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert block == Block(101, 200)
    assert len({r["headers"]["Idempotency-Key"] for r in stub.requests}) == 1


def test_gives_up_after_the_policy_and_says_why():
    retry, sleeps = policy(attempts=4)
    stub = StubServer([error(503, "service_unavailable")] * 10)
    with stub, pytest.raises(ServiceUnavailable, match="4 attempt"):
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert len(stub.requests) == 4
    assert len(sleeps) == 3


def test_gives_up_at_the_deadline():
    retry, _ = policy(attempts=100, deadline=0.0)
    with StubServer([error(503, "service_unavailable")] * 10) as stub, pytest.raises(ServiceUnavailable):
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert len(stub.requests) == 1


def test_connection_refused_is_retried_then_unavailable():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    retry, sleeps = policy(attempts=3)
    with pytest.raises(ServiceUnavailable, match="cannot connect"):
        HttpBackend(f"http://127.0.0.1:{port}", retry=retry).allocate("orders", 1)
    assert len(sleeps) == 2


@pytest.mark.parametrize(
    ("reply", "raised", "code"),
    [
        (error(404, "counter_not_found"), CounterNotFound, "counter_not_found"),
        (error(409, "counter_exhausted"), CounterExhausted, "counter_exhausted"),
        (error(409, "counter_exists"), Conflict, "counter_exists"),
        (error(400, "invalid_count"), InvalidRequest, "invalid_count"),
        (error(422, "idempotency_key_reused"), InvalidRequest, "idempotency_key_reused"),
        ((403, {}, {"message": "Missing Authentication Token"}), AuthError, "http_403"),
    ],
)
def test_errors_retrying_cannot_fix_are_raised_at_once(reply, raised, code):
    retry, sleeps = policy()
    with StubServer([reply, BLOCK]) as stub, pytest.raises(raised) as caught:
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert caught.value.code == code
    assert len(stub.requests) == 1
    assert sleeps == []


def test_creates_and_deletes_are_not_repeated_when_their_outcome_is_unknown():
    retry, _ = policy()
    stub = StubServer([DROP, (201, {}, {"name": "x"})])
    with stub, pytest.raises(ServiceUnavailable, match="may have been applied"):
        HttpBackend(stub.url, retry=retry).create("x")
    assert len(stub.requests) == 1


def test_api_key_auth_sends_the_key():
    with StubServer([BLOCK]) as stub:
        HttpBackend(stub.url, auth=ApiKeyAuth("secret-key")).allocate("orders", 1)
    assert stub.requests[0]["headers"]["x-api-key"] == "secret-key"


def test_iam_auth_signs_for_execute_api_in_the_endpoints_region(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    auth = IamAuth()
    headers = auth.headers(
        "POST", "https://abc123.execute-api.eu-west-2.amazonaws.com/v1/counters/o/batch", b"{}"
    )
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-2/execute-api/aws4_request" in headers["Authorization"]
    assert headers["X-Amz-Security-Token"] == "token"
    assert "X-Amz-Date" in headers


def test_iam_auth_needs_a_region_somewhere(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ValueError, match="region"):
        IamAuth().headers("GET", "http://127.0.0.1:3000/admin/counters", None)
    assert (
        "us-west-1"
        in IamAuth(region="us-west-1").headers("GET", "http://127.0.0.1:3000/x", None)["Authorization"]
    )


@pytest.mark.parametrize("endpoint", ["", "ftp://x", "localhost:3000", "http://"])
def test_bad_endpoints_are_refused(endpoint):
    with pytest.raises(ValueError, match="endpoint"):
        HttpBackend(endpoint)
