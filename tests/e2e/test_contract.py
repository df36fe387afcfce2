"""The HTTP contract as a caller sees it: shapes, the error shape, and
Cache-Control: no-store on every answer (an ID served from a cache would be
handed out twice)."""

from __future__ import annotations

import pytest

ERROR_CASES = [
    ("POST", "/counters/{name}/batch", {"count": 0}, 400, "invalid_count"),
    ("POST", "/counters/{name}/batch", {"count": 1, "extra": 1}, 400, "invalid_body"),
    ("POST", "/counters/bad name!/next", None, 400, "invalid_name"),
    ("GET", "/admin/counters/{name}-missing", None, 404, "counter_not_found"),
    ("PUT", "/admin/counters/{name}", {"next": "seven"}, 400, "invalid_next"),
]


def assert_no_store(reply):
    assert reply.headers.get("Cache-Control") == "no-store", dict(reply.headers)
    assert reply.headers.get("Content-Type", "").startswith("application/json")


def test_next_and_batch_answer_their_documented_shapes(target, created):
    """Given a new counter, when next then batch are called, then each answers
    200 with exactly the documented fields, and is not to be cached."""
    first = target.call("POST", f"/counters/{created}/next")
    assert first.status_code == 200, first.text
    assert first.json() == {"counter": created, "id": 1}
    assert_no_store(first)
    block = target.call("POST", f"/counters/{created}/batch", {"count": 5})
    assert block.status_code == 200, block.text
    assert block.json() == {"counter": created, "start": 2, "end": 6, "count": 5, "step": 1}
    assert_no_store(block)


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), ERROR_CASES, ids=lambda v: str(v)[:20])
def test_errors_share_one_shape_and_are_not_cached(target, created, method, path, body, status, code):
    """Given bad input, when it is sent, then the answer is the documented
    4xx with {"error": {"code", "message"}}, no-store, and nothing changed."""
    before = target.call("GET", f"/admin/counters/{created}").json()
    reply = target.call(method, path.format(name=created), body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert_no_store(reply)
    assert target.call("GET", f"/admin/counters/{created}").json() == before


def test_unparseable_json_is_a_400(target, created):
    reply = target.call("POST", f"/counters/{created}/batch", raw=b"{not json")
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_json")
    assert_no_store(reply)
