"""A proxy on 127.0.0.1 in front of a DynamoDB endpoint that fails a share of
the calls passing through it, the ways DynamoDB and networks fail:

    throttle   400 ThrottlingException; the call is not applied
    error      500 InternalServerError; not applied
    timeout    no answer for longer than the caller waits; not applied
    lost       applied by DynamoDB, then the connection closes unanswered

Point the functions at it (AWS_ENDPOINT_URL_DYNAMODB, or the dev server's
--dynamodb-endpoint). The choice is seeded, so a failing run can be replayed.
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time

import requests

from tests.support.loopback import LoopbackServer, QuietHandler

KINDS = ("throttle", "error", "timeout", "lost")
_ERRORS = {
    "throttle": (
        400,
        "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        "Rate of requests exceeds the allowed throughput.",
    ),
    "error": (500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"),
}


class DynamoDBCallHandler(QuietHandler):
    """A handler for DynamoDB's JSON protocol, over keep-alive connections as
    botocore uses them."""

    protocol_version = "HTTP/1.1"

    def read_call(self) -> tuple[str, bytes]:
        """The operation (from X-Amz-Target, e.g. "UpdateItem") and the body."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        return (self.headers.get("X-Amz-Target") or "").rsplit(".", 1)[-1], body


class FaultProxy(LoopbackServer):
    def __init__(
        self,
        upstream: str,
        *,
        rates: dict[str, float],
        seed: int = 1,
        timeout_seconds: float = 2.5,
        max_timeouts: int = 3,
        max_in_a_row: int | None = None,
    ) -> None:
        unknown = set(rates) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}")
        self.upstream = upstream.rstrip("/")
        self.rates = rates
        self.timeout_seconds = timeout_seconds
        self.max_timeouts = max_timeouts
        self.max_in_a_row = max_in_a_row  # then one call passes: botocore's retries get through
        self._in_a_row = 0
        self.enabled = True
        self.injected: collections.Counter[str] = collections.Counter()
        self.by_operation: collections.Counter[tuple[str, str]] = collections.Counter()
        self.calls = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._session = threading.local()
        proxy = self

        class Handler(DynamoDBCallHandler):
            def do_POST(self) -> None:
                operation, body = self.read_call()
                fault = proxy._choose(operation)
                if fault in _ERRORS:
                    status, kind, message = _ERRORS[fault]
                    self._reply(status, json.dumps({"__type": kind, "message": message}).encode())
                    return
                if fault == "timeout":
                    time.sleep(proxy.timeout_seconds)
                    self.drop()
                    return
                answer = proxy._http().post(
                    proxy.upstream + self.path, data=body, headers=self.forwarded_headers(), timeout=30
                )
                if fault == "lost":
                    self.drop()
                    return
                self._reply(answer.status_code, answer.content, answer.headers.get("Content-Type"))

            def _reply(self, status: int, data: bytes, content_type: str | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type or "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(Handler)

    def _http(self) -> requests.Session:
        if not hasattr(self._session, "value"):
            self._session.value = requests.Session()
        return self._session.value

    def _choose(self, operation: str) -> str | None:
        with self._lock:
            self.calls += 1
            if not self.enabled:
                return None
            if self.max_in_a_row is not None and self._in_a_row >= self.max_in_a_row:
                self._in_a_row = 0
                return None
            roll = self._rng.random()
            for kind in KINDS:
                rate = self.rates.get(kind, 0.0)
                if roll < rate:
                    if kind == "timeout" and self.injected["timeout"] >= self.max_timeouts:
                        return None
                    self.injected[kind] += 1
                    self.by_operation[(kind, operation)] += 1
                    self._in_a_row += 1
                    return kind
                roll -= rate
            self._in_a_row = 0
            return None


class StallingProxy(LoopbackServer):
    """A DynamoDB endpoint on 127.0.0.1 that holds requests open without
    answering, the way a slow or unreachable DynamoDB looks to the client:

        answer_on=None  holds every request (DynamoDB never answers)
        answer_on=3     holds the first two attempts of each distinct call
                        and forwards the third upstream

    A call is told apart by its operation and body: a retry resends the same
    body (newly signed), a new call has a body of its own (its own
    timestamps, tokens or key). A held request is released when the client
    hangs up, or at the latest when the proxy closes, so that no thread
    outlives the test."""

    def __init__(self, upstream: str, *, answer_on: int | None, hold_seconds: float = 60.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.answer_on = answer_on
        self.hold_seconds = hold_seconds
        self.enabled = True
        self.attempts: collections.Counter[str] = collections.Counter()
        self.held = 0
        self._closing = threading.Event()
        self._lock = threading.Lock()
        proxy = self

        class Handler(DynamoDBCallHandler):
            def do_POST(self) -> None:
                operation, body = self.read_call()
                if proxy._hold(operation, body):
                    proxy._closing.wait(proxy.hold_seconds)
                    self.drop()
                    return
                answer = requests.post(
                    proxy.upstream + self.path, data=body, headers=self.forwarded_headers(), timeout=30
                )
                self.send_response(answer.status_code)
                content_type = answer.headers.get("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self._serve(Handler)

    def _hold(self, operation: str, body: bytes) -> bool:
        with self._lock:
            if not self.enabled:
                return False
            call = f"{operation} {body.decode(errors='replace')}"
            self.attempts[call] += 1
            hold = self.answer_on is None or self.attempts[call] < self.answer_on
            self.held += hold
            return hold

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        super().__exit__(*exc)
