"""Every request ends before the function's Timeout, whatever DynamoDB does.

The retry budget used to be a count sized for one DynamoDB call (3 attempts
of 1 s connect + 2 s read, plus backoff), but a keyed request makes three
calls and an auto-created counter five: against a DynamoDB that answered
each call only on its third attempt, requests ran 17-27 s, past the 15 s
Timeout, where Lambda kills them and API Gateway answers 502 without
Retry-After. Here the dev server runs the functions with a short Timeout
(the FunctionTimeout parameter), in front of a DynamoDB that never answers or
that answers each call on its third attempt; every route must answer inside
that Timeout with a success or a 503 with Retry-After. The Timeout is kept
where Lambda keeps it, on the function's own clock: the dev server fails an
invocation that ran its whole Timeout, as Lambda does, so a request measured
from here would also count the HTTP round trip and the server's queue, which
a loaded machine can stretch past any bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devserver.process import DevServer
from idblocks_core.dal import dynamodb as dynamodb_calls
from localrun.dynamodb import EmbeddedDynamoDB, client
from localrun.tables import TABLE_NAMES
from localrun.template import default_template
from tests.support.fault_proxy import StallingProxy

NEVER_TIMEOUT = 3  # seconds; the template's smallest FunctionTimeout
THIRD_TIMEOUT = 6
# How long a finished request's record is kept (the template's default).
IDEMPOTENCY_TTL = int(default_template().environment("NextFunction", TABLE_NAMES)["IDEMPOTENCY_TTL_SECONDS"])


class Scenario:
    def __init__(
        self, server: DevServer, proxy: StallingProxy, tables: Any, timeout: int, prefix: str
    ) -> None:
        self.server = server
        self.proxy = proxy
        self.tables = tables  # straight to the embedded DynamoDB, past the proxy
        self.timeout = timeout
        # The embedded DynamoDBs of one test process share moto's state:
        # each scenario's counters have names of their own.
        self.prefix = prefix

    def request(self, method: str, path: str, body: Any, key: str | None) -> requests.Response:
        path = path.format(p=self.prefix)
        if isinstance(body, dict) and "name" in body:
            body = {**body, "name": self.prefix + body["name"]}
        headers = {"Idempotency-Key": key} if key else {}
        return requests.request(method, self.server.url + path, json=body, headers=headers, timeout=60)

    def send(self, method: str, path: str, body: Any = None, key: str | None = None) -> requests.Response:
        """One request, which must be answered inside the function's Timeout,
        with a success or a 503 that says when to retry: a function still
        running at its Timeout is failed by the dev server (500), as Lambda
        fails it (API Gateway's 502)."""
        reply = self.request(method, path, body, key)
        assert reply.status_code < 300 or reply.status_code == 503, (reply.status_code, reply.text)
        if reply.status_code == 503:
            assert reply.json()["error"]["code"] == "service_unavailable"
            assert int(reply.headers["Retry-After"]) >= 1
        return reply

    def healthy(self, method: str, path: str, body: Any = None, key: str | None = None) -> requests.Response:
        """A request with DynamoDB answering: the test looking, not the system under test."""
        self.proxy.enabled = False
        try:
            return self.request(method, path, body, key)
        finally:
            self.proxy.enabled = True

    def in_progress_records(self) -> dict[str, tuple[int, int]]:
        """The idempotency records of requests still in progress: by key,
        when each stops blocking its key (ms since the epoch) and when it
        was written (ms, to the second below: its TTL, in whole seconds, was
        set from the same clock reading's second)."""
        items = self.tables.scan(TableName=TABLE_NAMES["IdempotencyTable"], ConsistentRead=True)["Items"]
        return {
            item["id"]["S"]: (
                int(item["in_progress_expiration"]["N"]),
                (int(item["expiration"]["N"]) - IDEMPOTENCY_TTL) * 1000,
            )
            for item in items
            if item.get("status", {}).get("S") == "INPROGRESS"
        }


def scenario(answer_on: int | None, timeout: int, prefix: str) -> Iterator[Scenario]:
    dynamodb = EmbeddedDynamoDB().start()
    tables = client(dynamodb.endpoint)
    there_before = set(tables.list_tables()["TableNames"])
    try:
        with StallingProxy(dynamodb.endpoint, answer_on=answer_on) as proxy:
            proxy.enabled = False  # not while the server starts and creates its tables
            server = DevServer("--dynamodb-endpoint", proxy.url, "--parameter", f"FunctionTimeout={timeout}")
            with server:
                ready = Scenario(server, proxy, tables, timeout, prefix)
                for name in ("orders", "doomed"):
                    created = ready.request("POST", "/admin/counters", {"name": name}, None)
                    assert created.status_code == 201, created.text
                proxy.enabled = True
                yield ready
                proxy.enabled = False
    finally:
        # moto keeps its tables per process, across embedded servers: leave none behind
        for name in set(tables.list_tables()["TableNames"]) - there_before:
            tables.delete_table(TableName=name)
        dynamodb.stop()


@pytest.fixture(scope="module")
def never() -> Iterator[Scenario]:
    yield from scenario(answer_on=None, timeout=NEVER_TIMEOUT, prefix="never-")


@pytest.fixture(scope="module")
def third() -> Iterator[Scenario]:
    yield from scenario(answer_on=3, timeout=THIRD_TIMEOUT, prefix="third-")


# Every (method, path) of the API, and the paths of several DynamoDB calls:
# a key (the idempotency record's calls) and an auto-created counter.
EVERY_ROUTE = [
    pytest.param("POST", "/counters/{p}orders/next", None, None, id="next"),
    pytest.param("GET", "/counters/{p}orders/next", None, None, id="next-get"),
    pytest.param("POST", "/counters/{p}orders/next", None, "n-1", id="next-keyed"),
    pytest.param("POST", "/counters/{p}fresh-a/next", None, None, id="next-auto-create"),
    pytest.param("POST", "/counters/{p}orders/batch", {"count": 5}, "b-1", id="batch-keyed"),
    pytest.param("POST", "/admin/counters", {"name": "invoices"}, None, id="admin-create"),
    pytest.param("GET", "/admin/counters", None, None, id="admin-list"),
    pytest.param("GET", "/admin/counters/{p}orders", None, None, id="admin-get"),
    pytest.param("PUT", "/admin/counters/{p}orders", {"next": 1000}, None, id="admin-set"),
    pytest.param("DELETE", "/admin/counters/{p}doomed", None, None, id="admin-delete"),
]
# Each held attempt costs a read timeout: a few routes stand for the rest
# (the keyed batch is test_a_keyed_request_that_gave_up_...).
THIRD_ATTEMPT_ROUTES = [
    pytest.param("POST", "/counters/{p}orders/next", None, None, id="next"),
    pytest.param("POST", "/counters/{p}fresh-b/batch", {"count": 5}, "b-2", id="batch-keyed-auto-create"),
    pytest.param("GET", "/admin/counters", None, None, id="admin-list"),
    pytest.param("PUT", "/admin/counters/{p}orders", {"next": 1000}, None, id="admin-set"),
]


@pytest.mark.parametrize(("method", "path", "body", "key"), EVERY_ROUTE)
def test_a_dynamodb_that_never_answers_is_a_503_inside_the_timeout(never, method, path, body, key):
    """Every call held open: each route gives up in time and says when to retry."""
    reply = never.send(method, path, body, key)
    assert reply.status_code == 503


@pytest.mark.parametrize(("method", "path", "body", "key"), THIRD_ATTEMPT_ROUTES)
def test_a_dynamodb_answering_on_the_third_attempt_is_answered_inside_the_timeout(
    third, method, path, body, key
):
    """Each call answered on its third attempt: a one-call route succeeds, a
    route of several calls succeeds or answers 503 in time."""
    held_before = third.proxy.held
    reply = third.send(method, path, body, key)
    assert third.proxy.held > held_before, "the request met no held attempt"
    if key is None and "fresh" not in path:
        assert reply.status_code < 300, reply.text  # one DynamoDB call: it fits


def test_a_keyed_request_that_gave_up_is_retried_once_its_timeout_has_passed(third):
    """A keyed batch (three DynamoDB calls, each answered on its third
    attempt) does not fit in the Timeout: it answers 503 in time and leaves
    its idempotency record in progress. The record must block the key's
    retry no longer than the function's Timeout, and the retry takes the
    block exactly once."""
    before = third.healthy("GET", "/admin/counters/{p}orders").json()["next"]
    in_progress_before = third.in_progress_records()
    first = third.send("POST", "/counters/{p}orders/batch", {"count": 7}, "gave-up")
    if first.status_code == 200:
        pytest.skip("the keyed batch fitted in the Timeout; nothing was left in progress")
    [(expiry, written)] = [
        at for key, at in third.in_progress_records().items() if key not in in_progress_before
    ]
    # Both read off the server's clock as the record was written, so no time
    # spent on the way counts: the key is blocked for what was left of the
    # Timeout, never longer (the second is the TTL's whole-second rounding).
    assert expiry - written <= (third.timeout + 1) * 1000, "the key is blocked past the Timeout"

    answers = []
    give_up = time.monotonic() + 120  # generous: a passing run retries for about the Timeout
    while time.monotonic() < give_up:
        retry = third.healthy("POST", "/counters/{p}orders/batch", {"count": 7}, "gave-up")
        answers.append(retry.status_code)
        if retry.status_code == 200:
            break
        assert retry.status_code == 409, retry.text  # request_in_progress
        time.sleep(min(int(retry.headers["Retry-After"]), 1))
    assert answers[-1] == 200, answers
    block = retry.json()
    after = third.healthy("GET", "/admin/counters/{p}orders").json()["next"]
    assert (block["start"], block["end"]) == (before, before + 6)
    assert after == before + 7, "the block was taken more than once, or IDs were lost"


def test_the_store_gives_up_before_the_cutoff(monkeypatch):
    """With a fake clock: an attempt that cannot end before the cut-off is not
    started, and a backoff that would leave no time for one is not slept."""
    now = [100.0]
    monkeypatch.setattr(dynamodb_calls.time, "monotonic", lambda: now[0])
    slept: list[float] = []
    monkeypatch.setattr(
        dynamodb_calls.time,
        "sleep",
        lambda seconds: (slept.append(seconds), now.__setitem__(0, now[0] + seconds)),
    )

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 4_000

    class Request:
        def __init__(self) -> None:
            self.context: dict[str, Any] = {}

    attempts = []

    class SlowClient:
        def get_item(self, **_: Any) -> dict:
            request = Request()
            dynamodb_calls._fit_attempt_to_deadline(request)
            attempts.append(request.context["read_timeout"])
            now[0] += request.context["read_timeout"]  # held until the read timeout
            raise dynamodb_calls.BotoConnectionError(error="read timeout")

    with dynamodb_calls.deadline(Context()), pytest.raises(dynamodb_calls.BotoCoreError):
        dynamodb_calls.call_dynamodb(SlowClient(), "get_item")
    # cut-off at 103.5: 1 s, 1 s, then 0.5 s left for reading; no fourth attempt
    assert len(attempts) == 3
    assert attempts[-1] < dynamodb_calls.READ_TIMEOUT_SECONDS
    assert now[0] <= 100.0 + 4.0 - dynamodb_calls.RESPONSE_MARGIN_SECONDS
    assert len(slept) == 2
