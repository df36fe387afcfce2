"""Another counters table, read as it stands, for ``idblocks recover``: the
one a stack ran on before a restore, or the table a restore made. Read with
the caller's own AWS credentials (botocore's chain, as IamAuth finds them)
and region; AWS_ENDPOINT_URL_DYNAMODB points it at another DynamoDB (a local
one), as it does every AWS SDK. Reading is all this does: a stack's table
takes writes from its own functions only, so a counter moves through the
admin API.

The table's items are as the service writes them (one per counter name):
``name``, ``hwm`` (the last ID handed out or skipped), ``max_id``, ``step``
and ``residue`` (absent on items from before regions: 1 and 0), ``cache``
(absent: 1), and ``deleted_at`` once deleted; see the service's counter
store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from idblocks.errors import IdBlocksError, MissingCredentials, MissingRegion, ServiceUnavailable
from idblocks.routes import check_name

_NOT_FOUND = ("ResourceNotFoundException",)
_REFUSED = ("AccessDeniedException", "UnrecognizedClientException", "ValidationException")


class TableError(IdBlocksError):
    """The table cannot be read, or is not a counters table: nothing is changed."""


@dataclass(frozen=True)
class StoredCounter:
    """A counter as a table holds it: ``hwm`` is the last ID it handed out
    (or skipped, or was set past)."""

    name: str
    hwm: int
    max: int
    step: int = 1
    residue: int = 0
    cache: int = 1
    deleted: bool = False


def read_counters(
    table: str, *, region: str | None = None, session: Any = None, page_size: int | None = None
) -> dict[str, StoredCounter]:
    """Every counter of ``table``, deleted ones included, by a consistent
    Scan (``page_size``: items a Scan call reads at most; DynamoDB's own
    limit of 1 MB a call otherwise)."""
    import botocore.session
    from botocore.config import Config

    session = session or botocore.session.get_session()
    region = region or os.environ.get("AWS_REGION") or session.get_config_variable("region")
    if not region:
        raise MissingRegion(
            f"no AWS region to read the table {table} in: pass --region, or set AWS_REGION, "
            "AWS_DEFAULT_REGION or the profile's region"
        )
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30)
    client = session.create_client("dynamodb", region_name=region, config=config)
    # Whole items: a Scan reads (and bills) them whole anyway, and an item
    # without a counter's attributes shows a table that is not a counters table.
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    if page_size is not None:
        request["Limit"] = page_size
    counters: dict[str, StoredCounter] = {}
    while True:
        page = _scan(client, request, table, region)
        for item in page.get("Items", []):
            counter = _counter_of(item, table)
            counters[counter.name] = counter
        if "LastEvaluatedKey" not in page:
            return counters
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _scan(client: Any, request: dict[str, Any], table: str, region: str) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        page: dict[str, Any] = client.scan(**request)
        return page
    except NoCredentialsError:
        raise MissingCredentials(
            f"no AWS credentials to read the table {table}: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where an IAM role provides them"
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = str(error.get("Code", "")), str(error.get("Message", ""))
        if code in _NOT_FOUND:
            raise TableError(f"no table {table} in {region}: {message}") from None
        if code in _REFUSED:
            raise TableError(
                f"cannot read the table {table} in {region} ({code}: {message}); reading it takes "
                "dynamodb:Scan on it with your credentials"
            ) from None
        raise ServiceUnavailable(f"reading the table {table} failed: {code}: {message}") from None
    except BotoCoreError as exc:
        raise ServiceUnavailable(f"reading the table {table} failed: {exc}") from None


def _counter_of(item: dict[str, Any], table: str) -> StoredCounter:
    try:
        name = check_name(item["name"]["S"])
        return StoredCounter(
            name=name,
            hwm=int(item["hwm"]["N"]),
            max=int(item["max_id"]["N"]),
            step=int(item["step"]["N"]) if "step" in item else 1,
            residue=int(item["residue"]["N"]) if "residue" in item else 0,
            cache=int(item["cache"]["N"]) if "cache" in item else 1,
            deleted="deleted_at" in item,
        )
    except (KeyError, TypeError, ValueError):
        shown = {key: item[key] for key in sorted(item)[:4]}
        raise TableError(
            f"{table} holds an item that is not a counter ({shown}...): is it the counters table "
            "(the CountersTableName output), not the idempotency table?"
        ) from None
