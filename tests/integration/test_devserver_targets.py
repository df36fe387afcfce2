"""One reading of the path as sent (devserver.gateway.target_as_sent):
routing, the SigV4 check and the IAM resource all take the path from the
request target the same way, so the route run is the path signed and the
path evaluated. Each odd request target is answered as API Gateway answers
it: a path with an empty segment ("//") names no route, whatever follows
the "?"; a "://" after the "?" is the query's; an absolute-form target is
its path; a fragment is no part of the request.

Routing read "//host/..." as a host and a path (werkzeug), or, when "://"
came after the "?" and the path held %2F, as the path after the host, while
the signature was checked on the whole path: the route run and the path
signed could differ."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from devserver.process import DevServer
from tests.support.signing import CLIENT_KEY, iam_dev_server, identity, send_target, sign, sigv4_query

UNKNOWN = (403, "unknown_route_or_unsigned")
# (request target, what API Gateway answers: status and code, the counter that answered)
TARGETS = {
    "// then a route's path": ("//counters/orders/next", UNKNOWN),
    "//host then a route's path": ("//h/counters/orders/next", UNKNOWN),
    "//host, %2F, and :// after the ?": ("//h/counters/a%2Fb/next?u=http://x", UNKNOWN),
    ":// after the ?": ("/counters/orders/next?u=http://x/y", (200, "orders")),
    "%2F and :// after the ?": ("/counters/a%2Fb/next?u=http://x", (400, "invalid_name")),
    "absolute form": ("http://h/counters/orders/next", (200, "orders")),
    "absolute form, // path": ("http://h//counters/orders/next", UNKNOWN),
    "a fragment": ("/counters/orders/next#section", (200, "orders")),
    "a route's path with a trailing //": ("/counters/orders//next", UNKNOWN),
}


def answer(reply) -> tuple[int, str]:
    if reply.status == 200:
        return 200, reply.body["counter"]
    if reply.status == 403 and reply.body["error"]["code"] == "unknown_route_or_unsigned":
        assert reply.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    return reply.status, reply.body["error"]["code"]


@pytest.mark.parametrize("form", list(TARGETS))
def test_each_odd_target_is_answered_as_api_gateway_answers_it(dev, form):
    target, expected = TARGETS[form]
    assert answer(send_target(dev.url, "POST", target)) == expected


@pytest.fixture(scope="module")
def client_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """ClientAuth AWS_IAM and a client identity that may take IDs of orders only."""
    args = ["--parameter", "ClientCounters=orders", *identity("client", CLIENT_KEY)]
    with iam_dev_server(tmp_path_factory.mktemp("targets") / "state.json", args=args) as server:
        yield server


def signed_for(url: str, target: str) -> dict[str, str]:
    """The headers of a request to ``target`` as a client signs the URL it
    sends (the query encoded the one SigV4 way), with its Host."""
    parts = urlsplit(target if target.startswith("http://") else url + target)
    query = sigv4_query(parts.query)
    signed = f"http://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    return {"Host": parts.netloc} | sign("POST", signed, access_key=CLIENT_KEY[0], secret_key=CLIENT_KEY[1])


@pytest.mark.parametrize("form", list(TARGETS))
def test_a_signed_odd_target_runs_the_route_it_was_signed_and_evaluated_for(client_only, form):
    """The same answers, signed as the client identity: what routes to next
    on orders passes its policy, and a name its policy does not name (a%2Fb)
    is refused by the policy before the function could say invalid_name."""
    target, expected = TARGETS[form]
    if expected == (400, "invalid_name"):
        expected = (403, "access_denied")
    reply = send_target(client_only.url, "POST", target, signed_for(client_only.url, target))
    assert answer(reply) == expected, reply.body
