"""AsyncHttpBackend: HttpBackend's request (retries, Idempotency-Key, error
mapping, Retry-After, auth) on the event loop, against the same scripted HTTP
server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from idblocks import (
    ApiKeyAuth,
    AsyncSequence,
    AuthError,
    Conflict,
    CounterExhausted,
    CounterNotFound,
    IamAuth,
    InvalidRequest,
    MissingCredentials,
    RetryPolicy,
    ServiceUnavailable,
)
from idblocks.async_backend import AsyncHttpBackend
from idblocks.block import Block
from tests.support.aws_env import without_aws_credentials
from tests.support.stub_http import DROP, StubServer

BLOCK = (200, {}, {"counter": "orders", "start": 101, "end": 200, "count": 100})
FAST = RetryPolicy(base=0.001, cap=0.01)


def error(status, code, headers=None):
    return (status, headers or {}, {"error": {"code": code, "message": f"{code} happened"}})


def allocate(backend, count=100, key="k1"):
    async def main():
        try:
            return await backend.allocate("orders", count, idempotency_key=key)
        finally:
            await backend.aclose()

    return asyncio.run(main())


def test_allocate_sends_count_and_a_key_and_returns_the_block():
    with StubServer([BLOCK]) as stub:
        block = allocate(AsyncHttpBackend(stub.url))
    assert block == Block(101, 200)
    (request,) = stub.requests
    assert (request["method"], request["path"]) == ("POST", "/counters/orders/batch")
    assert json.loads(request["body"]) == {"count": 100}
    assert request["headers"]["Idempotency-Key"] == "k1"


@pytest.mark.parametrize("status", [429, 503, 502, 504])
def test_throttling_and_outages_are_retried_with_the_same_key(status):
    refused = error(status, "service_unavailable")
    with StubServer([refused, refused, BLOCK]) as stub:
        block = allocate(AsyncHttpBackend(stub.url, retry=FAST))
    assert block == Block(101, 200)
    assert [r["headers"]["Idempotency-Key"] for r in stub.requests] == ["k1"] * 3
    # 429 and the service's 503 are capacity refusals: the Sequence backs off
    assert block.capacity_refusals == (2 if status in (429, 503) else 0)


def test_a_lost_response_is_retried_with_the_same_key():
    with StubServer([DROP, BLOCK]) as stub:
        assert allocate(AsyncHttpBackend(stub.url, retry=FAST)) == Block(101, 200)
    assert [r["headers"]["Idempotency-Key"] for r in stub.requests] == ["k1", "k1"]


def test_retry_after_is_honoured_on_the_loop():
    with StubServer([error(503, "service_unavailable", {"Retry-After": "0.3"}), BLOCK]) as stub:
        started = time.monotonic()
        allocate(AsyncHttpBackend(stub.url, retry=FAST))
        waited = time.monotonic() - started
    assert len(stub.requests) == 2
    assert waited >= 0.3  # never shorter than asked (FAST alone waits at most 0.01 s)


@pytest.mark.parametrize(
    ("reply", "raised", "code"),
    [
        (error(404, "counter_not_found"), CounterNotFound, "counter_not_found"),
        (error(409, "counter_exhausted"), CounterExhausted, "counter_exhausted"),
        (error(409, "counter_exists"), Conflict, "counter_exists"),
        (error(400, "invalid_count"), InvalidRequest, "invalid_count"),
        ((403, {}, {"message": "Missing Authentication Token"}), AuthError, "http_403"),
    ],
)
def test_errors_retrying_cannot_fix_are_raised_at_once(reply, raised, code):
    with StubServer([reply, BLOCK]) as stub, pytest.raises(raised) as caught:
        allocate(AsyncHttpBackend(stub.url, retry=FAST))
    assert caught.value.code == code
    assert len(stub.requests) == 1


def test_gives_up_after_the_policy_and_says_why():
    retry = RetryPolicy(attempts=3, base=0.001)
    with (
        StubServer([error(503, "service_unavailable")] * 3) as stub,
        pytest.raises(ServiceUnavailable, match="3 attempt") as caught,
    ):
        allocate(AsyncHttpBackend(stub.url, retry=retry))
    assert len(stub.requests) == 3
    assert caught.value.capacity_refusals == 3


def test_connection_refused_is_retried_then_unavailable():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServiceUnavailable, match="cannot connect"):
        allocate(AsyncHttpBackend(f"http://127.0.0.1:{port}", retry=RetryPolicy(attempts=3, base=0.001)))


def test_api_key_auth_sends_the_key():
    with StubServer([BLOCK]) as stub:
        allocate(AsyncHttpBackend(stub.url, auth=ApiKeyAuth("secret-key")))
    assert stub.requests[0]["headers"]["x-api-key"] == "secret-key"


class RecordingIamAuth(IamAuth):
    """IamAuth that notes the thread it signs on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads = []

    def headers(self, method, url, body):
        self.threads.append(threading.current_thread())
        return super().headers(method, url, body)


def test_sigv4_is_signed_off_the_event_loop(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    auth = RecordingIamAuth(region="eu-west-2", lazy=True)
    with StubServer([BLOCK]) as stub:
        allocate(AsyncHttpBackend(stub.url, auth=auth))
    authorization = stub.requests[0]["headers"]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-2/execute-api/aws4_request" in authorization
    assert auth.threads
    assert threading.main_thread() not in auth.threads  # the loop runs on the main thread


def test_lazy_iam_auth_looks_for_credentials_at_the_first_request_and_says_what_is_missing(
    monkeypatch, tmp_path
):
    without_aws_credentials(monkeypatch, tmp_path)
    auth = IamAuth(region="eu-west-2", lazy=True)  # nothing looked for yet: no error
    with StubServer([BLOCK]) as stub, pytest.raises(MissingCredentials, match="AWS_ACCESS_KEY_ID"):
        allocate(AsyncHttpBackend(stub.url, auth=auth))
    assert stub.requests == []


def test_an_async_sequence_over_http_rides_through_a_lost_response():
    replies = [
        (200, {}, {"start": 1, "end": 10}),
        DROP,
        (200, {}, {"start": 11, "end": 20}),
    ]

    async def main(url):
        async with AsyncSequence(
            AsyncHttpBackend(url, retry=FAST), "orders", block_size=10, prefetch=False
        ) as seq:
            return [await seq.next_id() for _ in range(20)]

    with StubServer(replies) as stub:
        ids = asyncio.run(main(stub.url))
    assert ids == list(range(1, 21))
    keys = [r["headers"]["Idempotency-Key"] for r in stub.requests]
    assert keys[1] == keys[2]  # the lost request was asked again with its key
    assert keys[0] != keys[1]


def retry_after(seconds: str):
    return error(503, "service_unavailable", {"Retry-After": seconds})


def test_a_retry_after_past_the_callers_wait_is_honoured_not_hammered():
    """Reproduces: with Retry-After past the backend's deadline, the backend
    gave up at once, and the AsyncSequence sent the request again at once,
    again and again (44 to 46 requests in 2 s) until wait_timeout; the
    sync Sequence sent 1. A wait asked past the caller's wait_timeout is
    told at once, after one request."""

    async def main(url):
        seq = AsyncSequence(AsyncHttpBackend(url, retry=FAST), "orders", block_size=10, wait_timeout=2)
        try:
            with pytest.raises(ServiceUnavailable, match="120") as caught:
                await seq.next_id()
            return caught.value
        finally:
            await seq.aclose(timeout=0)

    with StubServer([retry_after("120")] * 100) as stub:
        refused = asyncio.run(main(stub.url))
    assert len(stub.requests) == 1
    assert refused.retry_after == 120


def test_a_retry_after_within_the_callers_wait_is_waited_then_asked_again():
    """The service's Retry-After (0.3 s) is past the backend's own deadline
    (0.1 s): the backend gives up, and the AsyncSequence asks again, with
    the request's key, once that time has passed."""

    async def main(url):
        seq = AsyncSequence(
            AsyncHttpBackend(url, retry=RetryPolicy(base=0.001, deadline=0.1)),
            "orders",
            block_size=10,
            wait_timeout=30,
        )
        try:
            started = time.monotonic()
            first = await seq.next_id()
            return first, time.monotonic() - started
        finally:
            await seq.aclose(timeout=0)

    with StubServer([retry_after("0.3"), (200, {}, {"start": 1, "end": 10})]) as stub:
        first, waited = asyncio.run(main(stub.url))
    assert first == 1
    assert len(stub.requests) == 2
    assert stub.requests[0]["headers"]["Idempotency-Key"] == stub.requests[1]["headers"]["Idempotency-Key"]
    assert waited >= 0.3  # never sooner than asked
