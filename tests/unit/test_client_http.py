"""HttpBackend: retries, Idempotency-Key, error mapping and auth, against a
scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from email.utils import formatdate

import pytest

from idblocks import (
    ApiKeyAuth,
    AuthError,
    Conflict,
    CounterExhausted,
    CounterNotFound,
    HttpBackend,
    IamAuth,
    InvalidName,
    InvalidRequest,
    MissingCredentials,
    MissingRegion,
    RetryPolicy,
    Sequence,
    ServiceError,
    ServiceUnavailable,
    UnexpectedResponse,
)
from idblocks.block import Block
from idblocks.retry import parse_retry_after
from tests.support.aws_env import credentials_without_region, without_aws_credentials
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


def test_connection_refused_once_the_endpoint_has_answered_is_retried_then_unavailable():
    retry, sleeps = policy(attempts=3)
    with StubServer([BLOCK]) as stub:
        backend = HttpBackend(stub.url, retry=retry)
        backend.allocate("orders", 100)
    with socket.socket() as held:  # the stub's port, bound and not listening: refused
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", int(stub.url.rsplit(":", 1)[1])))
        with pytest.raises(ServiceUnavailable, match=r"after 3 attempt\(s\): cannot connect"):
            backend.allocate("orders", 1)
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
    with pytest.raises(MissingRegion, match="AWS_REGION"):
        IamAuth().headers("GET", "http://127.0.0.1:3000/admin/counters", None)
    assert (
        "us-west-1"
        in IamAuth(region="us-west-1").headers("GET", "http://127.0.0.1:3000/x", None)["Authorization"]
    )


# A private API's endpoint-specific host names (API Gateway developer guide,
# "Invoke a private API"), and hosts that only look like an API's.
PRIVATE_URLS = [
    ("https://a1b2c3d4e5-vpce-0123456789abcdef0.execute-api.eu-west-2.amazonaws.com/v1", "eu-west-2"),
    ("https://a1b2c3d4e5-vpce-11112222.execute-api.cn-north-1.amazonaws.com.cn/v1", "cn-north-1"),
    ("https://a1b2c3d4e5.execute-api.us-gov-west-1.amazonaws.com/prod", "us-gov-west-1"),
]


@pytest.mark.parametrize(("url", "region"), PRIVATE_URLS)
def test_iam_auth_signs_a_private_apis_url_for_its_region_and_host(monkeypatch, url, region):
    """Given a private API's URL through one of its VPC endpoints and no
    region configured, when a request is signed, then it is signed for
    execute-api in the region the host names, over that host: what API
    Gateway checks (here with the dev server's check, devserver.sigv4),
    which refuses the same signature under another host."""
    from datetime import UTC, datetime
    from urllib.parse import urlsplit

    from devserver.sigv4 import Key, Received, Refused, verify

    credentials_without_region(monkeypatch)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    auth = IamAuth()
    HttpBackend(url, auth=auth)  # a region is found: no MissingRegion
    path = urlsplit(url).path + "/counters/orders/batch"
    headers = auth.headers("POST", url + "/counters/orders/batch", b'{"count": 2}')
    assert f"/{region}/execute-api/aws4_request" in headers["Authorization"]
    keys = {"AKIDEXAMPLE": Key("AKIDEXAMPLE", "secret")}

    def arriving_at(host: str) -> Received:
        return Received("POST", path, "", [*headers.items(), ("host", host)], b'{"count": 2}')

    assert verify(arriving_at(urlsplit(url).hostname or ""), keys, region, datetime.now(UTC)).access_key
    with pytest.raises(Refused) as refused:
        verify(arriving_at("vpce-0123456789abcdef0-abcd.execute-api.eu-west-2.vpce.amazonaws.com"),
               keys, region, datetime.now(UTC))  # fmt: skip
    assert refused.value.kind == "INVALID_SIGNATURE"


@pytest.mark.parametrize(
    "url",
    [
        "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com.example.com/v1",
        "https://ids.example.com/v1",
        "https://a1b2c3d4e5-other.execute-api.eu-west-1.amazonaws.com/v1",
    ],
)
def test_a_host_that_only_looks_like_an_apis_names_no_region(monkeypatch, url):
    credentials_without_region(monkeypatch)
    with pytest.raises(MissingRegion):
        HttpBackend(url, auth=IamAuth())


@pytest.mark.parametrize("endpoint", ["", "ftp://x", "localhost:3000", "http://"])
def test_bad_endpoints_are_refused(endpoint):
    with pytest.raises(ValueError, match="endpoint"):
        HttpBackend(endpoint)


# -- Retry-After as an HTTP date, and 500s ---------------------------------------


# The client's wall clock, stopped on a whole second: an HTTP date has whole
# seconds, so a date this far ahead of it is exactly that many seconds away,
# however long the machine takes between writing the date and reading it.
NOW = 1_800_000_000.0


def test_retry_after_as_an_http_date_is_honoured():
    """Retry-After may be an HTTP date instead of seconds: a date 20 s ahead
    was ignored (the client slept its own backoff, about 0.02 s)."""
    retry, sleeps = policy(base=0.001, now=lambda: NOW)
    when = formatdate(NOW + 20, usegmt=True)
    with StubServer([error(503, "service_unavailable", {"Retry-After": when}), BLOCK]) as stub:
        assert HttpBackend(stub.url, retry=retry).allocate("orders", 100) == Block(101, 200)
    assert len(stub.requests) == 2
    assert sleeps == [20.0]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("0", 0.0),
        ("Thu, 01 Jan 1970 00:02:00 GMT", 20.0),  # the preferred HTTP-date form
        ("Thursday, 01-Jan-70 00:02:00 GMT", 20.0),  # RFC 850, obsolete but allowed
        ("Thu Jan  1 00:02:00 1970", 20.0),  # asctime, obsolete but allowed
        ("Thu, 01 Jan 1970 00:01:00 GMT", 0.0),  # already past: no wait
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date(value, seconds):
    assert parse_retry_after(value, now=100.0) == seconds


def test_a_retry_after_past_the_deadline_gives_up_instead_of_waiting():
    retry, sleeps = policy(deadline=10.0, now=lambda: NOW)
    when = formatdate(NOW + 3600, usegmt=True)
    stub = StubServer([error(503, "service_unavailable", {"Retry-After": when}), BLOCK])
    with stub, pytest.raises(ServiceUnavailable, match="past the 10 s deadline"):
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert len(stub.requests) == 1
    assert sleeps == []


def test_a_500_to_a_keyed_request_is_retried_with_the_same_key():
    """A 500 answered to a block request (which always carries an
    Idempotency-Key) was raised at once, although repeating it with the same
    key cannot take a second block."""
    retry, sleeps = policy()
    with StubServer([error(500, "internal_error"), BLOCK]) as stub:
        assert HttpBackend(stub.url, retry=retry).allocate("orders", 100) == Block(101, 200)
    assert len(stub.requests) == 2
    assert len({r["headers"]["Idempotency-Key"] for r in stub.requests}) == 1
    assert len(sleeps) == 1


def test_a_500_is_retried_a_few_times_only_and_the_key_outlives_it():
    retry, _ = policy(server_error_attempts=3)
    stub = StubServer([error(500, "internal_error")] * 10)
    # ServiceUnavailable, not a ServiceError: the outcome is unknown, so a
    # Sequence keeps the key for its next try
    with stub, pytest.raises(ServiceUnavailable, match="3 times") as caught:
        HttpBackend(stub.url, retry=retry).allocate("orders", 100)
    assert not isinstance(caught.value, ServiceError)
    assert len(stub.requests) == 3


def test_a_500_to_an_unkeyed_create_is_not_retried():
    retry, sleeps = policy()
    stub = StubServer([error(500, "internal_error"), (201, {}, {"name": "x"})])
    with stub, pytest.raises(ServiceError) as caught:
        HttpBackend(stub.url, retry=retry).create("x")
    assert caught.value.status == 500
    assert len(stub.requests) == 1
    assert sleeps == []


def test_a_500_to_a_read_is_retried():
    retry, _ = policy()
    state = {"name": "x", "next": 1, "max": 9, "created_at": "t", "updated_at": "t"}
    with StubServer([error(500, "internal_error"), (200, {}, state)]) as stub:
        assert HttpBackend(stub.url, retry=retry).get("x") == state
    assert len(stub.requests) == 2


# -- answers the client cannot read ---------------------------------------------


@pytest.mark.parametrize(
    ("call", "reply"),
    [
        (lambda b: b.allocate("orders", 5), {"counter": "orders"}),
        (lambda b: b.allocate("orders", 5), {"counter": "orders", "start": "1", "end": 5}),
        (lambda b: b.allocate("orders", 5), {"counter": "orders", "start": 9, "end": 5}),
        (lambda b: b.allocate("orders", 5), [1, 5]),
        (lambda b: b.next("orders"), {"counter": "orders"}),
        (lambda b: b.next("orders"), {"counter": "orders", "id": True}),
        (lambda b: b.get("orders"), ["orders"]),
        (lambda b: b.list(), {"counters": []}),
        (lambda b: b.list(), {"counters": None, "cursor": None}),
    ],
)
def test_a_200_without_the_promised_fields_is_an_unexpected_response(call, reply):
    """A 200 whose JSON lacks what the route promises raised a bare KeyError
    (a traceback in the CLI)."""
    retry, _ = policy()
    with StubServer([(200, {}, reply)]) as stub, pytest.raises(UnexpectedResponse):
        call(HttpBackend(stub.url, retry=retry))


def test_a_200_that_is_not_json_is_an_unexpected_response():
    """A non-JSON 200 (a proxy's HTML page, say) raised json's ValueError,
    which the CLI took for bad usage."""
    stub = StubServer([(200, {}, b"<html>gateway says hi</html>")])
    with stub, pytest.raises(UnexpectedResponse, match="not JSON: <html>gateway says hi"):
        HttpBackend(stub.url).next("orders")
    assert len(stub.requests) == 1  # not repeated: it was answered


# -- names HTTP cannot carry ----------------------------------------------------


@pytest.mark.parametrize("name", [".", ".."])
@pytest.mark.parametrize(
    "call",
    [
        lambda b, n: b.allocate(n, 1),
        lambda b, n: b.next(n),
        lambda b, n: b.create(n),
        lambda b, n: b.get(n),
        lambda b, n: b.set_next(n, 5),
        lambda b, n: b.delete(n),
    ],
)
def test_dot_segment_names_are_refused_before_sending(name, call):
    """A counter named "." or ".." was sent as /counters/./batch, which the
    HTTP library collapses to /counters/batch: another route, or another
    counter. The client now refuses such names and sends nothing."""
    with StubServer([BLOCK] * 2) as stub, pytest.raises(InvalidName) as caught:
        call(HttpBackend(stub.url), name)
    assert stub.requests == []
    assert caught.value.code == "invalid_name"
    assert isinstance(caught.value, InvalidRequest)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["", "a" * 129, "or ders", "a/b", "ordérs", "x\n", None, 5])
def test_names_outside_the_rule_are_refused_before_sending(name):
    with StubServer([BLOCK]) as stub, pytest.raises(InvalidName):
        HttpBackend(stub.url).allocate(name, 1)
    assert stub.requests == []


@pytest.mark.parametrize("name", ["...", ".a", "a.", "..a", "-", "_", "a" * 128, "." * 128])
def test_names_with_dots_that_are_not_dot_segments_are_sent_as_they_are(name):
    with StubServer([BLOCK]) as stub:
        HttpBackend(stub.url).allocate(name, 1)
    assert stub.requests[0]["path"] == f"/counters/{name}/batch"


# -- credentials ------------------------------------------------------------------


@pytest.fixture
def no_aws_credentials(monkeypatch, tmp_path):
    without_aws_credentials(monkeypatch, tmp_path)


def test_the_readme_example_without_credentials_raises_auth_error_before_any_request(no_aws_credentials):
    """The README's HttpBackend(url, auth=IamAuth()) + Sequence with no AWS
    credentials raised a bare ValueError from deep in the prefetcher, behind
    chained tracebacks; the README promises AuthError."""

    def readme_example(url):
        backend = HttpBackend(url, auth=IamAuth())
        with Sequence(backend, "orders") as orders:
            return orders.next_id()

    stub = StubServer([BLOCK])
    with stub, pytest.raises(AuthError, match="AWS_ACCESS_KEY_ID") as caught:
        readme_example(stub.url)
    assert stub.requests == []
    assert isinstance(caught.value, MissingCredentials)
    assert "\n" not in str(caught.value)  # one line: what to set
    assert "AWS_PROFILE" in str(caught.value)


def test_a_profile_that_does_not_exist_is_missing_credentials(no_aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    with pytest.raises(MissingCredentials, match="nobody"):
        IamAuth()


def test_no_region_for_the_endpoint_is_refused_when_the_backend_is_made(monkeypatch):
    credentials_without_region(monkeypatch)
    with StubServer([BLOCK]) as stub:
        with pytest.raises(MissingRegion, match="--region"):
            HttpBackend(stub.url, auth=IamAuth())
        HttpBackend(
            "https://abc123.execute-api.eu-west-1.amazonaws.com/v1", auth=IamAuth()
        )  # named in the URL
        HttpBackend(stub.url, auth=IamAuth(region="eu-west-1")).allocate("orders", 1)
    assert "/eu-west-1/execute-api/" in stub.requests[0]["headers"]["Authorization"]


@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_iam_auth_takes_the_region_from_the_environment(monkeypatch, variable):
    """The region error said "set AWS_REGION", but botocore reads only
    AWS_DEFAULT_REGION: setting AWS_REGION, as Lambda does, did not help."""
    credentials_without_region(monkeypatch)
    monkeypatch.setenv(variable, "ap-south-2")
    headers = IamAuth().headers("GET", "http://127.0.0.1:3000/admin/counters", None)
    assert "/ap-south-2/execute-api/" in headers["Authorization"]
