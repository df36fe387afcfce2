"""What the tests' small HTTP servers share: a threaded server on 127.0.0.1
(a free port), started and stopped as a context manager, and a request
handler base that logs nothing, answers JSON, and can hang up without
answering."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        pass  # the tests report what matters

    def forwarded_headers(self) -> dict[str, str]:
        """The request's headers, to pass upstream (the HTTP library sets
        Host and Content-Length itself)."""
        return {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}

    def drop(self) -> None:
        """Close the connection without answering."""
        self.close_connection = True
        self.connection.close()

    def send_json(self, status: int, data: bytes) -> None:
        """Answer ``status`` with ``data``, a JSON body."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
