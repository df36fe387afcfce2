"""The unit tests' DynamoDB: tables made once per process, copied into each
test's mock_aws, must leave every test the state create_tables leaves."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from localrun.tables import TABLE_NAMES, create_tables
from tests.conftest import scan_all
from tests.support.moto_tables import EmptyTables


def _described(client: Any) -> dict[str, Any]:
    """Each table's description and TTL, less the creation time."""
    described = {}
    for name in TABLE_NAMES.values():
        table = client.describe_table(TableName=name)["Table"]
        table.pop("CreationDateTime")
        ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        described[name] = (table, ttl)
    return described


def test_each_round_starts_from_what_create_tables_makes_whatever_the_last_one_did(template):
    """Given tables made once, when one round writes to both tables and
    turns their TTL off, then the next round's tables are empty and
    described exactly as tables create_tables just made."""
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, template, TABLE_NAMES)
        made_now = _described(client)
    empty = EmptyTables(template)

    with empty.mocked() as client:
        for logical_id, name in TABLE_NAMES.items():
            key = template.create_table_kwargs(logical_id, name)["KeySchema"][0]["AttributeName"]
            client.put_item(TableName=name, Item={key: {"S": "left-behind"}})
            ttl = template.ttl_attribute(logical_id)
            if ttl:
                client.update_time_to_live(
                    TableName=name, TimeToLiveSpecification={"Enabled": False, "AttributeName": ttl}
                )
        assert all(scan_all(client, logical_id) for logical_id in TABLE_NAMES)
        assert _described(client) != made_now

    with empty.mocked() as client:
        assert [scan_all(client, logical_id) for logical_id in TABLE_NAMES] == [[], []]
        assert _described(client) == made_now
