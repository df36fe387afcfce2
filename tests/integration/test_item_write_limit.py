"""The embedded DynamoDB (moto in server mode, on 127.0.0.1) with a per-item
write budget: over it, a write gets the error DynamoDB gives for a hot key,
and nothing is written. The budget's arithmetic, on a fake clock, is in
tests/unit/test_item_write_limit.py."""

from __future__ import annotations

import uuid

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localrun.dynamodb import (
    HOT_KEY_REASON,
    LOCAL_CREDENTIALS,
    THROTTLED_ERROR,
    EmbeddedDynamoDB,
    client,
)


@pytest.fixture
def dynamodb():
    embedded = EmbeddedDynamoDB().start()
    try:
        ddb = client(
            embedded.endpoint, Config(retries={"total_max_attempts": 1}), credentials=LOCAL_CREDENTIALS
        )
        # moto's tables outlive one server in this process: a name of its own.
        table = f"counters-{uuid.uuid4().hex[:8]}"
        ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "name", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "name", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield embedded, ddb, table
    finally:
        embedded.stop()


def _add(ddb, table, name):
    return ddb.update_item(
        TableName=table,
        Key={"name": {"S": name}},
        UpdateExpression="ADD next_value :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )


def test_a_hot_item_gets_dynamodbs_throttling_error_and_is_not_written(dynamodb):
    """The answer botocore parses is DynamoDB's own: the exception, its
    hot-key throttling reason and the table's ARN; the refused ADD is not
    applied, and other items and reads are unaffected."""
    embedded, ddb, table = dynamodb
    embedded.limit_item_writes(2, clock=lambda: 0.0)  # one second that never ends
    assert _add(ddb, table, "hot")["Attributes"]["next_value"]["N"] == "1"
    assert _add(ddb, table, "hot")["Attributes"]["next_value"]["N"] == "2"
    with pytest.raises(ClientError) as refused:
        _add(ddb, table, "hot")
    error = refused.value.response
    assert error["Error"]["Code"] == THROTTLED_ERROR == "ProvisionedThroughputExceededException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    [reason] = error["ThrottlingReasons"]
    assert reason["reason"] == HOT_KEY_REASON == "TableWriteKeyRangeThroughputExceeded"
    assert reason["resource"].endswith(f":table/{table}")
    # a put to the same key counts against the same item
    with pytest.raises(ClientError):
        ddb.put_item(TableName=table, Item={"name": {"S": "hot"}, "next_value": {"N": "9"}})
    item = ddb.get_item(TableName=table, Key={"name": {"S": "hot"}})["Item"]
    assert item["next_value"]["N"] == "2"
    assert _add(ddb, table, "cold")["Attributes"]["next_value"]["N"] == "1"
    assert embedded.write_limit.throttled == 2


def test_without_a_limit_nothing_is_throttled(dynamodb):
    _, ddb, table = dynamodb
    assert [_add(ddb, table, "hot")["Attributes"]["next_value"]["N"] for _ in range(20)][-1] == "20"
