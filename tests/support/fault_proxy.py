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

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                operation = (self.headers.get("X-Amz-Target") or "").rsplit(".", 1)[-1]
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
