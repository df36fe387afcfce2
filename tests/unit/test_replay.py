"""A reused Idempotency-Key after its record expired, with an admin write in
between: the counter's allocation token must not make the old block look like
this request's own earlier write. Each case reproduces a duplicate (or a 200
for a deleted counter) that the service answered when admin writes refreshed
``updated_at`` but left ``alloc_token`` on the item.

The key record's expiry is played by deleting it from the idempotency table,
which is what DynamoDB's TTL does once the record is past its lifetime."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TABLE_NAMES, scan_all

KEY = {"Idempotency-Key": "invoice-run-42"}


def expire_key_records(dynamodb) -> None:
    records = scan_all(dynamodb, "IdempotencyTable")
    assert records, "the keyed request left no idempotency record to expire"
    for record in records:
        dynamodb.delete_item(TableName=TABLE_NAMES["IdempotencyTable"], Key={"id": record["id"]})


def take_then_expire(api, dynamodb, name: str = "orders") -> None:
    first = api.call("batch", name=name, body={"count": 5}, headers=KEY)
    assert (first.status, first.body["start"], first.body["end"]) == (200, 1, 5)
    expire_key_records(dynamodb)


def test_reused_key_after_an_admin_put_takes_a_new_block(api, dynamodb):
    """PUT next=6 in between: the reused key answered 1..5 again (a duplicate)
    and left the counter at next=6."""
    take_then_expire(api, dynamodb)
    assert api.call("admin-set", name="orders", body={"next": 6}).status == 200

    again = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert (again.status, again.body["start"], again.body["end"]) == (200, 6, 10)
    assert api.call("admin-get", name="orders").body["next"] == 11


def test_reused_key_on_a_deleted_counter_is_404_when_auto_create_is_off(api, dynamodb, lambda_env):
    """DELETE in between: the reused key answered 200 with the old block while
    GET said 404."""
    lambda_env(AUTO_CREATE_COUNTERS="false")
    api.call("admin-create", body={"name": "orders"})
    take_then_expire(api, dynamodb)
    assert api.call("admin-delete", name="orders").status == 204

    again = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert (again.status, again.error_code) == (404, "counter_not_found")
    assert api.call("admin-get", name="orders").status == 404


def test_reused_key_on_a_deleted_counter_is_404_with_auto_create_on_too(api, dynamodb):
    """DELETE in between, auto-create on: the reused key answered the old 1..5
    (and later revived the counter): a deleted counter stays deleted until
    an admin creates it again."""
    take_then_expire(api, dynamodb)
    assert api.call("admin-delete", name="orders").status == 204

    again = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert (again.status, again.error_code) == (404, "counter_not_found")
    assert api.call("admin-get", name="orders").status == 404


def test_reused_key_after_delete_and_re_create_takes_a_new_block(api, dynamodb):
    """DELETE then admin create (a revive) in between: the reused key answered
    1..5 again from the revived counter."""
    take_then_expire(api, dynamodb)
    assert api.call("admin-delete", name="orders").status == 204
    assert api.call("admin-create", body={"name": "orders"}).status == 201

    again = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert (again.status, again.body["start"], again.body["end"]) == (200, 6, 10)
    assert api.call("admin-get", name="orders").body["next"] == 11


def test_no_admin_write_leaves_an_allocation_token_behind(api, dynamodb):
    """Every non-allocating write forgets the last allocation, so no later
    write can make its token look fresh."""
    table = TABLE_NAMES["CountersTable"]

    def stored() -> dict:
        return dynamodb.get_item(TableName=table, Key={"name": {"S": "orders"}})["Item"]

    api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert {"alloc_token", "alloc_at"} <= set(stored())
    api.call("admin-set", name="orders", body={"next": 6})
    assert not {"alloc_token", "alloc_at"} & set(stored())

    for admin_write in ("admin-delete", "admin-create"):
        api.call("batch", name="orders", body={"count": 5}, headers=KEY)
        reply = api.call(admin_write, name="orders", body={"name": "orders"})
        assert reply.status in (201, 204), reply.body
        assert not {"alloc_token", "alloc_at"} & set(stored()), admin_write


def emitted_ids(capsys: pytest.CaptureFixture[str]) -> int:
    """IdsAllocated summed over the CloudWatch EMF lines printed since the last call."""
    total = 0
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            value = json.loads(line).get("IdsAllocated", 0)
            total += sum(value) if isinstance(value, list) else int(value)
    return total


def test_a_replayed_block_is_not_counted_as_allocated_again(api, dynamodb, capsys):
    """The allocation committed but its key record is gone (never saved, or
    expired while nothing else wrote): the retry gets the same block by its
    token, and IdsAllocated counted those 5 IDs a second time."""
    capsys.readouterr()
    first = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert emitted_ids(capsys) == 5
    expire_key_records(dynamodb)

    again = api.call("batch", name="orders", body={"count": 5}, headers=KEY)
    assert again.body == first.body
    assert emitted_ids(capsys) == 0
    assert api.call("next-post", name="orders").body["id"] == 6
    assert emitted_ids(capsys) == 1
