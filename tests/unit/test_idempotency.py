"""Idempotency-Key on next and batch."""

from __future__ import annotations

import os
import time

import pytest

from idblocks_core.logic.allocation import IdAllocator
from tests.conftest import TABLE_NAMES, scan_all

KEY = {"Idempotency-Key": "order-7f3a"}
BOB = {"userArn": "arn:aws:iam::123456789012:user/bob", "caller": "AIDABOB"}


def test_retry_with_the_same_key_gets_the_identical_response(api):
    first = api.call("batch", name="orders", body={"count": 10}, headers=KEY)
    retry = api.call("batch", name="orders", body={"count": 10}, headers=KEY)
    assert first.status == retry.status == 200
    assert retry.body == first.body == {"counter": "orders", "start": 1, "end": 10, "count": 10, "step": 1}
    assert retry.raw["body"] == first.raw["body"]
    # the retry took nothing: the next block starts right after the first
    assert api.call("batch", name="orders", body={"count": 1}).body["start"] == 11


def test_header_name_is_case_insensitive(api):
    first = api.call("next-post", name="orders", headers={"idempotency-key": "k1"})
    retry = api.call("next-post", name="orders", headers={"IDEMPOTENCY-KEY": "k1"})
    assert first.body == retry.body


def test_next_replays_too(api):
    ids = {api.call("next-post", name="orders", headers=KEY).body["id"] for _ in range(3)}
    assert ids == {1}
    assert api.call("next-post", name="orders").body["id"] == 2


def test_different_keys_get_different_blocks(api):
    a = api.call("batch", name="orders", body={"count": 5}, headers={"Idempotency-Key": "a"})
    b = api.call("batch", name="orders", body={"count": 5}, headers={"Idempotency-Key": "b"})
    assert (a.body["start"], b.body["start"]) == (1, 6)


def test_same_key_on_another_counter_is_another_request(api):
    a = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    b = api.call("batch", name="invoices", body={"count": 5}, headers=KEY)
    assert (a.body["counter"], b.body["counter"], b.body["start"]) == ("orders", "invoices", 1)


def test_same_key_with_a_different_count_is_422_and_takes_nothing(api):
    api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    reply = api.call("batch", name="orders", body={"count": 6}, headers=KEY)
    assert (reply.status, reply.error_code) == (422, "idempotency_key_reused")
    assert api.call("next-post", name="orders").body["id"] == 6


def test_one_caller_cannot_read_another_callers_result(api):
    alice = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    bob = api.call("batch", name="orders", body={"count": 5}, headers=KEY, identity=BOB)
    assert alice.body["start"] == 1
    assert bob.body["start"] == 6  # a fresh block, not alice's
    # and bob's replay is his own block
    assert api.call("batch", name="orders", body={"count": 5}, headers=KEY, identity=BOB).body == bob.body


def test_api_key_callers_are_told_apart(api):
    no_iam = {"userArn": None, "caller": None, "accessKey": None}
    one = api.call("next-post", name="orders", headers=KEY, identity=no_iam | {"apiKeyId": "key-one"})
    two = api.call("next-post", name="orders", headers=KEY, identity=no_iam | {"apiKeyId": "key-two"})
    assert (one.body["id"], two.body["id"]) == (1, 2)


@pytest.mark.parametrize("key", ["", "a b", "x" * 129, "tab\tkey", "ключ"])
def test_bad_keys_are_400_and_change_nothing(api, table_snapshot, key):
    before = table_snapshot()
    reply = api.call("next-post", name="orders", headers={"Idempotency-Key": key})
    assert (reply.status, reply.error_code) == (400, "invalid_idempotency_key")
    assert table_snapshot() == before


def test_bad_input_with_a_key_leaves_no_record_behind(api, dynamodb):
    bad = api.call("batch", name="orders", body={"count": 0}, headers=KEY)
    assert bad.status == 400
    assert scan_all(dynamodb, "IdempotencyTable") == []
    # so the corrected request with the same key goes through
    assert api.call("batch", name="orders", body={"count": 3}, headers=KEY).status == 200


def test_failed_allocation_is_not_remembered(api):
    api.call("admin-create", body={"name": "tiny", "max": 2})
    assert api.call("batch", name="tiny", body={"count": 3}, headers=KEY).status == 409
    api.call("admin-set", name="tiny", body={"next": 1})  # a no-op: still 2 left
    # same key and count, after the counter could serve it: a real answer, not a replay of the 409
    assert api.call("batch", name="tiny", body={"count": 2}, headers=KEY).status == 200


def test_a_duplicate_in_flight_is_409_with_retry_after(api, monkeypatch):
    inner = {}
    real_take_block = IdAllocator.take_block

    def allocate_while_a_duplicate_arrives(self, name, count, token=None):
        # While the first request holds its in-progress record, the same
        # request arrives again.
        inner["reply"] = api.call("batch", name="orders", body={"count": 4}, headers=KEY)
        return real_take_block(self, name, count, token)

    monkeypatch.setattr(IdAllocator, "take_block", allocate_while_a_duplicate_arrives)
    first = api.call("batch", name="orders", body={"count": 4}, headers=KEY)
    duplicate = inner["reply"]
    assert first.status == 200
    assert (duplicate.status, duplicate.error_code) == (409, "request_in_progress")
    assert int(duplicate.headers["Retry-After"]) >= 1


def test_records_expire_after_the_configured_ttl(api, dynamodb):
    # The record is written between these two readings of the wall clock,
    # however long the request takes on a loaded machine.
    before = int(time.time())
    api.call("next-post", name="orders", headers=KEY)
    after = time.time()
    (record,) = scan_all(dynamodb, "IdempotencyTable")
    assert "expiration" in record  # the template's TTL attribute
    ttl = int(os.environ["IDEMPOTENCY_TTL_SECONDS"])
    assert ttl >= 3600
    assert before + ttl <= int(record["expiration"]["N"]) <= after + ttl


def test_records_live_in_the_idempotency_table_only(api, dynamodb):
    """Given the functions' environment naming both tables, when a keyed
    request is answered, then its record is in the table IDEMPOTENCY_TABLE
    names and the counters table holds only the counter."""
    assert os.environ["IDEMPOTENCY_TABLE"] == TABLE_NAMES["IdempotencyTable"]
    api.call("next-post", name="orders", headers=KEY)
    counters_items = scan_all(dynamodb, "CountersTable")
    assert [item["name"]["S"] for item in counters_items] == ["orders"]
    (record,) = scan_all(dynamodb, "IdempotencyTable")
    assert record["status"]["S"] == "COMPLETED"
