"""The template's tables outside AWS: their one set of local names, and
creating them (with their TTL) from the template's own definitions."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from localrun.template import Template

# Physical names of the template's tables wherever they run locally: the dev
# server, the tests and the benchmarks. devserver/env.json (for
# `sam local start-api`) names the same.
TABLE_NAMES = {"CountersTable": "idblocks-counters", "IdempotencyTable": "idblocks-idempotency"}


def create_tables(dynamodb: Any, template: Template, names: dict[str, str]) -> list[str]:
    """Create the template's tables (those not there yet); returns the ones created."""
    existing = set(dynamodb.list_tables()["TableNames"])
    created = []
    for logical_id, table_name in names.items():
        if table_name in existing:
            continue
        try:
            dynamodb.create_table(**template.create_table_kwargs(logical_id, table_name))
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
            continue  # another dev server created it first
        dynamodb.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1})
        ttl = template.ttl_attribute(logical_id)
        if ttl:
            dynamodb.update_time_to_live(
                TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
            )
        created.append(table_name)
    return created


def load_items(dynamodb: Any, table_name: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        pending = {table_name: batch}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
