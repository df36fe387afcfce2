"""Idempotency-Key through the public API."""

from __future__ import annotations

import uuid

import pytest

from idblocks import InvalidRequest


def test_the_same_key_gets_the_same_answer(target, created):
    """Given a batch sent with a key, when it is sent again with that key,
    then the answer is identical and the counter moved only once."""
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = target.call("POST", f"/counters/{created}/batch", {"count": 10}, headers=key)
    again = target.call("POST", f"/counters/{created}/batch", {"count": 10}, headers=key)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert again.json() == first.json()
    assert target.call("POST", f"/counters/{created}/next").json()["id"] == first.json()["end"] + 1


def test_the_same_key_with_another_count_is_422_and_takes_nothing(target, created):
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = target.call("POST", f"/counters/{created}/batch", {"count": 10}, headers=key)
    other = target.call("POST", f"/counters/{created}/batch", {"count": 11}, headers=key)
    assert other.status_code == 422, other.text
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert target.call("POST", f"/counters/{created}/next").json()["id"] == first.json()["end"] + 1


def test_the_client_surfaces_a_reused_key_as_invalid_request(target, created):
    backend = target.backend()
    key = str(uuid.uuid4())
    assert backend.allocate(created, 5, idempotency_key=key) == backend.allocate(
        created, 5, idempotency_key=key
    )
    with pytest.raises(InvalidRequest):
        backend.allocate(created, 6, idempotency_key=key)
