"""HttpBackend across fork(): a child never talks on its parent's connections.

An HttpBackend keeps idle keep-alive connections in a pool. A forked child
inherits the pool's sockets: if it sent a request on one, the parent's and the
child's answers could cross, each process reading the other's block (the same
IDs in two processes). The server below speaks HTTP/1.1 and keeps connections
open, and records, for every request, the client port it came from: a child
that reused the parent's connection would arrive from the parent's port.
"""

from __future__ import annotations

import json
import os
import threading

from idblocks import HttpBackend
from tests.support.loopback import LoopbackServer, QuietHandler


class KeepAliveServer(LoopbackServer):
    """Answers every batch request with a block of its own, and notes the
    client port each request arrived from."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self._next = 1
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as API Gateway does

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                count = json.loads(self.rfile.read(length))["count"]
                with server._lock:
                    server.ports.append(self.client_address[1])
                    start, server._next = server._next, server._next + count
                data = json.dumps({"counter": "orders", "start": start, "end": start + count - 1}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(Handler)


def test_a_forked_child_opens_its_own_connection():
    """Given a backend whose pool holds an open connection to the service,
    when the process forks and the child asks for a block,
    then the child's request arrives on a connection of its own, and the
    parent's next request still works on its own."""
    with KeepAliveServer() as server:
        backend = HttpBackend(server.url)
        first = backend.allocate("orders", 10)
        assert first.start == 1
        parent_port = server.ports[-1]

        pid = os.fork()
        if pid == 0:  # the child: one request, then leave without running cleanup
            status = 0
            try:
                backend.allocate("orders", 10)
            except BaseException:  # noqa: BLE001 - reported through the exit status
                status = 1
            os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0

        assert len(server.ports) == 2
        child_port = server.ports[1]
        assert child_port != parent_port, "the child sent its request on the parent's connection"

        again = backend.allocate("orders", 10)
        assert again.start == 21
        backend.close()
