"""A restore of the counters table, played on one counter: its item as a
backup taken now holds it, and that copy written back as the restore writes
it (PutItem), on any DynamoDB a test talks to (moto in-process, or the dev
server's embedded one)."""

from __future__ import annotations

from typing import Any

from localrun.tables import TABLE_NAMES


def backup_of(dynamodb: Any, name: str) -> dict[str, Any]:
    key = {"name": {"S": name}}
    return dynamodb.get_item(TableName=TABLE_NAMES["CountersTable"], Key=key, ConsistentRead=True)["Item"]


def put_back(dynamodb: Any, item: dict[str, Any]) -> None:
    dynamodb.put_item(TableName=TABLE_NAMES["CountersTable"], Item=item)


def refuse_on_both_routes(api: Any, dynamodb: Any, name: str) -> None:
    """Through the in-process API: ``name`` hands out IDs by batch and next,
    is put back to a copy from before them, and is then refused once on each
    route (500 counter_moved_back)."""
    assert api.call("admin-create", body={"name": name}).status == 201
    backup = backup_of(dynamodb, name)
    assert api.call("batch", name=name, body={"count": 2}).status == 200
    assert api.call("next-post", name=name).status == 200
    put_back(dynamodb, backup)
    refused = [api.call("batch", name=name, body={"count": 2}), api.call("next-post", name=name)]
    assert [(reply.status, reply.error_code) for reply in refused] == [(500, "counter_moved_back")] * 2
