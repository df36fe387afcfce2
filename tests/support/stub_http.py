"""A scripted HTTP server on 127.0.0.1: answers each request with the next
scripted reply, and records what it was sent."""

from __future__ import annotations

import json
from typing import Any

from tests.support.loopback import LoopbackServer, QuietHandler

DROP = "drop"  # close the connection without answering


class StubServer(LoopbackServer):
    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(QuietHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                reply = (
                    stub.replies.pop(0)
                    if stub.replies
                    else (500, {}, {"error": {"code": "x", "message": "x"}})
                )
                if reply == DROP:
                    self.drop()
                    return
                status, headers, payload = reply
                if payload is None:
                    data = b""
                elif isinstance(payload, bytes):  # as it is: a body that is not JSON at all
                    data = payload
                else:
                    data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._serve(Handler)
