"""AllowGetNext=false on a running dev server: GET /counters/{name}/next is
405 with Allow: POST, and the served OpenAPI document drops the GET. (The
in-process side of the switch is in tests/unit/test_get_next.py.)"""

from __future__ import annotations

import pytest

from devserver.process import DevServer

NEXT = "/counters/{name}/next"


@pytest.fixture(scope="module")
def no_get_server(tmp_path_factory):
    state = tmp_path_factory.mktemp("no-get") / "state.json"
    with DevServer("--fresh", "--parameter", "AllowGetNext=false", state_file=state) as server:
        yield server


def test_the_dev_server_follows_the_switch(no_get_server):
    reply = no_get_server.get("/counters/orders/next")
    assert reply.status_code == 405
    assert reply.headers["Allow"] == "POST"
    assert reply.json()["error"]["code"] == "method_not_allowed"
    assert no_get_server.post("/counters/orders/next").json()["id"] == 1
    spec = no_get_server.get("/openapi.json").json()
    assert set(spec["paths"][NEXT]) == {"post"}
