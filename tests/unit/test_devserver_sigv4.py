"""The dev server's SigV4 check (devserver/sigv4.py), in-process: what a
client's signer (botocore's) signs verifies, and each change to a signed
request, or to what it was signed with, is refused as API Gateway refuses it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from devserver.gateway import Gateway, gateway_for, received_from, target_as_sent
from devserver.identities import IdentitySpec
from devserver.sigv4 import Key, Received, Refused, verify
from localrun.template import Template
from tests.support.signing import (
    ACCESS_KEY,
    CLIENT_KEY,
    REGION,
    SECRET_KEY,
    SERVER_ENV,
    TOKEN,
    sign,
    sigv4_query,
    skewed,
)

BASE = "http://127.0.0.1:3000"
KEYS = {ACCESS_KEY: Key(ACCESS_KEY, SECRET_KEY)}


def received(method: str, url: str, headers: dict[str, str], body: bytes = b"") -> Received:
    parts = urlsplit(url)
    host = {"Host": parts.netloc}  # as the HTTP client sends it
    return Received(method, parts.path, parts.query, list((host | headers).items()), body)


def check(request: Received, keys: dict[str, Key] = KEYS, now: datetime | None = None) -> Key:
    return verify(request, keys, REGION, now or datetime.now(UTC))


def refusal(request: Received, **kwargs) -> tuple[str, str]:
    with pytest.raises(Refused) as refused:
        check(request, **kwargs)
    return refused.value.kind, refused.value.error_type


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/counters/ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/next", b""),
        ("POST", "/counters/..x/batch", b'{"count": 5}'),
        ("GET", "/admin/counters?limit=10&cursor=eyJuYW1lIjoib3JkZXJzIn0%3D", b""),
        ("GET", "/admin/counters?cursor=a%2Bb%2Fc%3D&limit=2", b""),
        ("PUT", "/admin/counters/invoices", '{"next": 5, "note": "é"}'.encode()),
        ("POST", "/counters/orders%2F2024/next", b""),
        ("GET", "/admin/counters?a=1&a=0&b=", b""),
    ],
)
def test_what_botocore_signs_verifies(method, path, body):
    url = BASE + path
    assert check(received(method, url, sign(method, url, body), body)).access_key == ACCESS_KEY


def test_a_query_sent_encoded_otherwise_than_signed_verifies_as_api_gateway_decodes_it():
    """API Gateway compares the query decoded and re-encoded the one SigV4 way."""
    headers = sign("GET", BASE + "/admin/counters?cursor=a~b")
    assert check(received("GET", BASE + "/admin/counters?cursor=a%7Eb", headers))


def test_header_values_are_compared_with_their_spaces_folded():
    url = BASE + "/counters/orders/next"
    headers = sign("POST", url, headers={"X-Note": "a  b"})
    headers["X-Note"] = "  a b "
    assert check(received("POST", url, headers))


def test_the_clock_window_is_five_minutes_either_way():
    url = BASE + "/counters/orders/next"
    headers = sign("POST", url)
    signed_at = datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    request = received("POST", url, headers)
    for off in (timedelta(minutes=5), -timedelta(minutes=5), timedelta(0)):
        assert check(request, now=signed_at + off)
    for off in (timedelta(minutes=5, seconds=1), -timedelta(minutes=5, seconds=1)):
        assert refusal(request, now=signed_at + off) == ("INVALID_SIGNATURE", "InvalidSignatureException")


def without_part(headers: dict[str, str], part: str) -> dict[str, str]:
    kept = [piece for piece in headers["Authorization"].split(", ") if not piece.startswith(part)]
    return headers | {"Authorization": ", ".join(kept)}


URL = BASE + "/counters/orders/batch"
BODY = b'{"count": 3}'
INCOMPLETE = ("MISSING_AUTHENTICATION_TOKEN", "IncompleteSignatureException")
INVALID = ("INVALID_SIGNATURE", "InvalidSignatureException")
DENIED = ("ACCESS_DENIED", "AccessDeniedException")


def signed(**signing) -> dict[str, str]:
    return sign("POST", URL, BODY, **signing)


CASES = {
    "unsigned": (
        lambda: received("POST", URL, {}, BODY),
        ("MISSING_AUTHENTICATION_TOKEN", "MissingAuthenticationTokenException"),
    ),
    "another scheme": (
        lambda: received("POST", URL, {"Authorization": "Basic dXNlcjpwdw=="}, BODY),
        INCOMPLETE,
    ),
    "no Credential": (
        lambda: received("POST", URL, without_part(signed(), "AWS4-HMAC-SHA256 Credential"), BODY),
        INCOMPLETE,
    ),
    "no Signature": (lambda: received("POST", URL, without_part(signed(), "Signature"), BODY), INCOMPLETE),
    "a short scope": (
        lambda: received(
            "POST",
            URL,
            signed() | {"Authorization": signed()["Authorization"].replace("/aws4_request", "")},
            BODY,
        ),
        INCOMPLETE,
    ),
    "no X-Amz-Date": (
        lambda: received("POST", URL, {k: v for k, v in signed().items() if k != "X-Amz-Date"}, BODY),
        INCOMPLETE,
    ),
    "a malformed X-Amz-Date": (
        lambda: received("POST", URL, signed() | {"X-Amz-Date": "yesterday"}, BODY),
        INCOMPLETE,
    ),
    "a scope dated another day": (
        lambda: received("POST", URL, signed() | {"X-Amz-Date": "20200101T000000Z"}, BODY),
        INVALID,
    ),
    "the wrong secret": (lambda: received("POST", URL, signed(secret_key="nope"), BODY), INVALID),
    "another region": (lambda: received("POST", URL, signed(region="ap-south-1"), BODY), INVALID),
    "another service": (lambda: received("POST", URL, signed(service="execute-apis"), BODY), INVALID),
    "another method": (lambda: received("PUT", URL, signed(), BODY), INVALID),
    "another body": (lambda: received("POST", URL, signed(), b'{"count": 4}'), INVALID),
    "a signed header changed": (
        lambda: received("POST", URL, signed() | {"Content-Type": "text/plain"}, BODY),
        INVALID,
    ),
    "an unknown access key": (lambda: received("POST", URL, signed(access_key="AKIAOTHER"), BODY), DENIED),
    "a token the keys do not have": (lambda: received("POST", URL, signed(token=TOKEN), BODY), DENIED),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_mistake_is_refused_as_api_gateway_refuses_it(case):
    make, expected = CASES[case]
    assert refusal(make()) == expected


def test_a_skewed_signer_is_refused():
    with skewed(-7):
        headers = signed()
    assert refusal(received("POST", URL, headers, BODY)) == INVALID


def test_temporary_credentials_need_their_token_and_end_at_their_expiry():
    now = datetime.now(UTC)
    temporary = {ACCESS_KEY: Key(ACCESS_KEY, SECRET_KEY, TOKEN, expires=now + timedelta(minutes=1))}
    assert check(received("POST", URL, signed(token=TOKEN), BODY), keys=temporary)
    assert refusal(received("POST", URL, signed(), BODY), keys=temporary) == DENIED
    assert refusal(received("POST", URL, signed(token=TOKEN + "x"), BODY), keys=temporary) == DENIED
    expired = {ACCESS_KEY: Key(ACCESS_KEY, SECRET_KEY, TOKEN, expires=now - timedelta(seconds=1))}
    assert refusal(received("POST", URL, signed(token=TOKEN), BODY), keys=expired) == (
        "EXPIRED_TOKEN",
        "ExpiredTokenException",
    )


def test_a_host_left_out_of_the_signature_is_refused():
    headers = signed()
    headers["Authorization"] = headers["Authorization"].replace("content-type;host;", "content-type;")
    assert refusal(received("POST", URL, headers, BODY)) == INCOMPLETE


@pytest.mark.parametrize(
    ("signing", "reason"),
    [
        ({"region": "ap-south-1"}, "Credential should be scoped to a valid region, not 'ap-south-1'"),
        ({"service": "lambda"}, "Credential should be scoped to correct service: 'execute-api'"),
        ({"secret_key": "nope"}, "The request signature we calculated does not match"),
    ],
)
def test_the_reason_is_api_gateways_own_words(signing, reason):
    with pytest.raises(Refused) as refused:
        check(received("POST", URL, signed(**signing), BODY))
    assert refused.value.reason.startswith(reason), refused.value.reason


# -- one reading of the path as sent, for routing, signing and IAM ------------------

# (the request target as sent, the path and query the dev server reads from it)
TARGETS = {
    "origin form": ("/counters/orders/next", "/counters/orders/next", ""),
    "a query": ("/admin/counters?limit=2&cursor=a%2Fb", "/admin/counters", "limit=2&cursor=a%2Fb"),
    # the path's first segment is empty: no host in it
    "//host/...": ("//host/counters/orders/next", "//host/counters/orders/next", ""),
    "// and a route's path": ("//counters/orders/next", "//counters/orders/next", ""),
    # a "://" after the "?" is the query's, and decides nothing about the path
    ":// after the ?": ("/counters/orders/next?u=http://x/y", "/counters/orders/next", "u=http://x/y"),
    "//host/... and :// after the ?": (
        "//h/counters/a%2Fb/next?u=http://x",
        "//h/counters/a%2Fb/next",
        "u=http://x",
    ),
    "absolute form": ("http://h:3000/counters/orders/next?a=1", "/counters/orders/next", "a=1"),
    "absolute form, no path": ("http://h", "/", ""),
    "absolute form, // path": ("http://h//counters/orders/next", "//counters/orders/next", ""),
    "an encoded slash": ("/counters/orders%2F2024/next", "/counters/orders%2F2024/next", ""),
    "a fragment": ("/counters/orders/next?a=1#x?b=2", "/counters/orders/next", "a=1"),
    "a :// in the path": ("/counters/a://b/next", "/counters/a://b/next", ""),
}


@pytest.mark.parametrize("form", list(TARGETS))
def test_the_path_and_query_are_read_once_as_sent(form):
    target, path, query = TARGETS[form]
    assert target_as_sent({"RAW_URI": target}) == (path, query)
    assert received_from({"RAW_URI": target, "REQUEST_METHOD": "POST"}, [], b"").path == path


@pytest.mark.parametrize("form", list(TARGETS))
def test_a_request_signed_for_the_url_it_is_sent_to_verifies(form):
    """A client signs the URL it sends (its query encoded the one SigV4 way,
    as API Gateway reads it); the dev server checks the signature of the
    path it routes, read from the target by the same function."""
    target, path, query = TARGETS[form]
    host = urlsplit(target).netloc if target.startswith("http://") else urlsplit(BASE).netloc
    encoded = sigv4_query(query)
    headers = sign("GET", f"http://{host}{path}" + (f"?{encoded}" if query else ""))
    request = received_from(
        {"RAW_URI": target, "REQUEST_METHOD": "GET"}, [("Host", host), *headers.items()], b""
    )
    assert check(request).access_key == ACCESS_KEY


def test_a_path_other_than_the_one_signed_is_refused():
    """Signed for /counters/orders/next, sent to //h/counters/orders/next?u=http://x:
    werkzeug would have routed /h/... or, with the "://", /counters/...; the
    signature covers what is routed, and it is not that."""
    headers = sign("POST", BASE + "/counters/orders/next")
    request = received_from(
        {"RAW_URI": "//h/counters/orders/next", "REQUEST_METHOD": "POST"},
        [("Host", urlsplit(BASE).netloc), *headers.items()],
        b"",
    )
    assert refusal(request) == INVALID


# -- what the dev server says about a refused signature ----------------------------


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Gateway:
    """The dev server's gateway with ClientAuth AWS_IAM, its own key
    (SERVER_ENV's) and a client identity's (CLIENT_KEY)."""
    return gateway_for(
        "AWS_IAM",
        SERVER_ENV,
        key_file=tmp_path_factory.mktemp("keys") / "credentials",
        template=Template(parameter_overrides={"ClientAuth": "AWS_IAM"}),
        identities=[IdentitySpec.parse("client={}:{}".format(*CLIENT_KEY))],
    )


def advice(gateway: Gateway, headers: dict[str, str]) -> str:
    with pytest.raises(Refused) as refused:
        gateway.authenticate("POST", "/counters/{name}/batch", received("POST", URL, headers, BODY))
    assert refused.value.kind == "INVALID_SIGNATURE"
    return refused.value.reason


def test_a_wrong_secret_is_told_to_sign_with_the_secret_of_the_key_it_used_and_no_secret_is_shown(gateway):
    """Given an identity's access key signed with a wrong secret, the advice
    named the dev server's own key (sign with the secret key of AKIA...
    the server's), which the identity has no business with: it names the
    access key the request used, and whose it is, and never a secret."""
    client_key, client_secret = CLIENT_KEY
    said = advice(gateway, signed(access_key=client_key, secret_key="not-the-secret"))
    own = advice(gateway, signed(secret_key="not-the-secret"))
    stranger = advice(gateway, signed(access_key="AKIASTRANGER0000", region="ap-south-1"))
    for text in (said, own, stranger):
        for secret in (SECRET_KEY, client_secret, "not-the-secret"):
            assert secret not in text, text
    assert f"sign with the secret key of access key {client_key} (identity client)" in said, said
    assert ACCESS_KEY not in said, said  # the dev server's own has nothing to do with it
    assert f"sign with the secret key of access key {ACCESS_KEY} (the dev server's own)" in own, own
    assert "access key AKIASTRANGER0000, which the dev server does not know" in stranger, stranger
    assert f"{ACCESS_KEY}, {client_key} (client)" in stranger, stranger
