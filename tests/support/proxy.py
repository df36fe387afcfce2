"""An HTTP proxy on 127.0.0.1 in front of the dev server that can lose
responses: the request reaches the service and is applied, then the
connection is closed before the client hears back. It counts the requests it
forwards and notes the Idempotency-Key of each one it receives."""

from __future__ import annotations

import threading

import requests

from tests.support.loopback import LoopbackServer, QuietHandler


class LossyProxy(LoopbackServer):
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.lose = 0  # how many of the next responses to lose
        self.lost: list[tuple[str, str, int]] = []
        self.forwarded = 0
        self.keys: list[str] = []  # the Idempotency-Key of every request received, in order
        self._lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                if key := self.headers.get("Idempotency-Key"):
                    with proxy._lock:
                        proxy.keys.append(key)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                reply = requests.request(
                    self.command,
                    proxy.upstream + self.path,
                    data=body,
                    headers=self.forwarded_headers(),
                    timeout=30,
                )
                with proxy._lock:
                    proxy.forwarded += 1
                    lose = proxy.lose > 0
                    if lose:
                        proxy.lose -= 1
                        proxy.lost.append((self.command, self.path, reply.status_code))
                if lose:
                    self.drop()
                    return
                self.send_response(reply.status_code)
                for key, value in reply.headers.items():
                    if key.lower() not in (
                        "content-length",
                        "connection",
                        "transfer-encoding",
                        "server",
                        "date",
                    ):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._serve(Handler)
