"""The counters table. The only module that talks to DynamoDB.

One item per counter name:

    name        S  key
    hwm         N  high-water mark: the last ID handed out (start - 1 before any)
    room        N  IDs left: always max_id - hwm, kept in the same writes as hwm
    max_id      N  the last ID the counter may hand out
    created_at  S  ISO 8601, UTC
    updated_at  S
    deleted_at  S  present once deleted; the item stays so hwm is never lost
    alloc_token S  token of the last allocation, to recognise a retried write
    alloc_at    S  when that allocation was written; only allocations set it

Only an allocation writes alloc_token and alloc_at; every other write removes
both. A token is proof of "our own earlier write" only while it still names
the counter's last write: an admin write in between (PUT, DELETE, revive)
would otherwise leave an old token looking fresh, and its replay would hand
out a block the counter has already moved past or no longer owns.

An allocation is one conditional UpdateItem that ADDs n to hwm and -n to room,
on condition that the counter is live and room >= n. DynamoDB applies each
item write atomically and in order, so every allocation gets its own range,
whatever the concurrency. ``room`` exists because a condition cannot do
arithmetic: ``hwm + n <= max_id`` is written as ``room >= n``.

Every error from DynamoDB leaves here as a domain error (see ``_unavailable``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from idblocks_core.errors import (
    BelowHighWaterMark,
    CounterDeleted,
    CounterExhausted,
    CounterExists,
    CounterNotFound,
    CounterWouldMoveBack,
    InvalidInput,
    NextBeyondMax,
    ServiceUnavailable,
)
from idblocks_core.model import Block, Counter
from idblocks_core.rules import check_name

# botocore's standard retry mode: exponential backoff with jitter on throttling,
# 5xx and connection errors. Bounded so that the worst case (3 attempts of a
# 1 s connect + 2 s read, plus backoff) stays inside the function's timeout.
BOTO_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=1,
    read_timeout=2,
    tcp_keepalive=True,
)

_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)

_NAMES = {
    "#name": "name",
    "#hwm": "hwm",
    "#room": "room",
    "#max": "max_id",
    "#created": "created_at",
    "#updated": "updated_at",
    "#deleted": "deleted_at",
    "#token": "alloc_token",
    "#alloc_at": "alloc_at",
}
_LIVE = "attribute_exists(#hwm) AND attribute_not_exists(#deleted)"
# A counter's state when it is created (or revived): next ID, max, timestamps.
_NEW_STATE = "SET #hwm = :hwm, #room = :room, #max = :max, #created = :now, #updated = :now"
_NEW_STATE_NAMES = ("#hwm", "#room", "#max", "#created", "#updated")
# Every write that is not an allocation ends with this (see the module docstring).
_FORGET_ALLOCATION = "REMOVE #token, #alloc_at"
_ALLOCATION_NAMES = ("#token", "#alloc_at")


@functools.cache
def dynamodb_client() -> Any:
    """One client per container, built on first use. The endpoint follows
    boto3's standard configuration (AWS_ENDPOINT_URL_DYNAMODB for local runs)."""
    return boto3.session.Session().client("dynamodb", config=BOTO_CONFIG)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _names(*placeholders: str) -> dict[str, str]:
    return {p: _NAMES[p] for p in placeholders}


def _unavailable(exc: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(f"DynamoDB is unavailable, try again shortly ({type(exc).__name__})")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _new_state(first_id: int, max_id: int) -> dict[str, dict[str, str]]:
    hwm = first_id - 1
    return {":hwm": _n(hwm), ":room": _n(max_id - hwm), ":max": _n(max_id), ":now": _s(now_iso())}


def _to_counter(item: Mapping[str, Any]) -> Counter:
    return Counter(
        name=item["name"]["S"],
        next=int(item["hwm"]["N"]) + 1,
        max=int(item["max_id"]["N"]),
        created_at=item["created_at"]["S"],
        updated_at=item["updated_at"]["S"],
    )


class CounterStore:
    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        return self._client or dynamodb_client()

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """One DynamoDB call. Throttling and outages, once botocore's own
        retries are spent, become ServiceUnavailable; anything else (a missing
        table, a bad request) is a bug or a broken deployment and propagates."""
        try:
            return getattr(self.client, operation)(TableName=self.table_name, **kwargs)
        except ClientError as exc:
            if _error_code(exc) in _RETRYABLE_CODES:
                raise _unavailable(exc) from exc
            raise
        except BotoCoreError as exc:
            raise _unavailable(exc) from exc

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        """UpdateItem; when the condition does not hold, returns the item as it
        was (``{}`` if there is none) under ``"failed"`` instead of raising."""
        try:
            return self._call("update_item", ReturnValuesOnConditionCheckFailure="ALL_OLD", **kwargs)
        except ClientError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return {"failed": exc.response.get("Item", {})}
            raise

    # -- allocation ---------------------------------------------------------

    def allocate(self, name: str, count: int, token: str, replay_window: timedelta) -> Block:
        """Hand out the next ``count`` IDs of ``name``, or raise.

        ``token`` names this allocation. If botocore retries a write whose
        response was lost, the retry finds its own token on the item and
        returns the range that write took instead of taking a second one;
        ``replay_window`` bounds how old such a write may be.
        """
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=(
                "ADD #hwm :n, #room :minus_n SET #updated = :now, #token = :token, #alloc_at = :now"
            ),
            ConditionExpression=(
                f"{_LIVE} AND #room >= :n AND (attribute_not_exists(#token) OR #token <> :token)"
            ),
            ExpressionAttributeNames=_names("#hwm", "#room", "#updated", "#deleted", *_ALLOCATION_NAMES),
            ExpressionAttributeValues={
                ":n": _n(count),
                ":minus_n": _n(-count),
                ":now": _s(now_iso()),
                ":token": _s(token),
            },
            ReturnValues="UPDATED_NEW",
        )
        if "failed" not in response:
            end = int(response["Attributes"]["hwm"]["N"])
            return Block(end - count + 1, end)

        item = response["failed"]
        if not item:
            raise CounterNotFound(name)
        hwm = int(item["hwm"]["N"])
        # Deleted first: a deleted counter answers no replay, whatever it carries.
        if "deleted_at" in item:
            raise CounterDeleted(name, hwm)
        if item.get("alloc_token", {}).get("S") == token:
            allocated_at = item.get("alloc_at", {}).get("S")
            # An item written before alloc_at existed cannot prove when its
            # token was written: a new block (a gap) is safe, a replay may not be.
            if allocated_at and datetime.now(UTC) - datetime.fromisoformat(allocated_at) <= replay_window:
                # Our own earlier write: it committed, only its answer was lost.
                return Block(hwm - count + 1, hwm, replayed=True)
            raise StaleToken
        raise CounterExhausted(name, count, hwm + 1, int(item["max_id"]["N"]))

    # -- administration -----------------------------------------------------

    def create(self, name: str, first_id: int, max_id: int) -> Counter:
        """Create a counter that has never existed. Raises CounterExists, or
        CounterDeleted (with its high-water mark) for a deleted one."""
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=_NEW_STATE,
            ConditionExpression="attribute_not_exists(#name)",
            ExpressionAttributeNames=_names("#name", *_NEW_STATE_NAMES),
            ExpressionAttributeValues=_new_state(first_id, max_id),
            ReturnValues="ALL_NEW",
        )
        if "failed" in response:
            item = response["failed"]
            if "deleted_at" in item:
                raise CounterDeleted(name, int(item["hwm"]["N"]))
            raise CounterExists(name)
        return _to_counter(response["Attributes"])

    def revive(self, name: str, seen_hwm: int, first_id: int, max_id: int) -> Counter:
        """Bring a deleted counter back, handing out from ``first_id`` on, which
        must lie above the high-water mark ``seen_hwm`` it had when deleted;
        the condition makes sure nothing moved since."""
        if first_id <= seen_hwm:
            raise BelowHighWaterMark(name, "start", first_id, seen_hwm)
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=f"{_NEW_STATE} {_FORGET_ALLOCATION}, #deleted",
            ConditionExpression="attribute_exists(#deleted) AND #hwm = :seen",
            ExpressionAttributeNames=_names("#deleted", *_NEW_STATE_NAMES, *_ALLOCATION_NAMES),
            ExpressionAttributeValues={**_new_state(first_id, max_id), ":seen": _n(seen_hwm)},
            ReturnValues="ALL_NEW",
        )
        if "failed" in response:
            # Someone else revived it first (the only way the condition fails).
            raise CounterExists(name)
        return _to_counter(response["Attributes"])

    def get(self, name: str) -> Counter:
        response = self._call("get_item", Key={"name": _s(name)}, ConsistentRead=True)
        item = response.get("Item")
        if not item or "deleted_at" in item:
            raise CounterNotFound(name)
        return _to_counter(item)

    def list(self, limit: int, cursor: str | None) -> tuple[list[Counter], str | None]:
        """One page of live counters, and the cursor of the next page (None
        at the end). A page may hold fewer than ``limit`` and still have a
        cursor when deleted counters were skipped."""
        start_key = decode_cursor(cursor) if cursor else None
        counters: list[Counter] = []
        # Each Scan call reads up to 1 MB; a few calls are enough to fill a
        # page unless the table is mostly deleted counters.
        for _ in range(8):
            kwargs: dict[str, Any] = {
                "Limit": limit - len(counters),
                "ConsistentRead": True,
                "FilterExpression": "attribute_not_exists(#deleted)",
                "ExpressionAttributeNames": _names("#deleted"),
            }
            if start_key:
                kwargs["ExclusiveStartKey"] = start_key
            response = self._call("scan", **kwargs)
            counters.extend(_to_counter(item) for item in response.get("Items", []))
            start_key = response.get("LastEvaluatedKey")
            if not start_key or len(counters) >= limit:
                break
        return counters, encode_cursor(start_key) if start_key else None

    def set_next(self, name: str, next_id: int) -> Counter:
        """Move a counter forward so that it next hands out ``next_id``."""
        hwm = next_id - 1
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=f"SET #hwm = :hwm, #room = #max - :hwm, #updated = :now {_FORGET_ALLOCATION}",
            ConditionExpression=f"{_LIVE} AND #hwm <= :hwm AND #max >= :hwm",
            ExpressionAttributeNames=_names(
                "#hwm", "#room", "#max", "#updated", "#deleted", *_ALLOCATION_NAMES
            ),
            ExpressionAttributeValues={":hwm": _n(hwm), ":now": _s(now_iso())},
            ReturnValues="ALL_NEW",
        )
        if "failed" not in response:
            return _to_counter(response["Attributes"])
        item = response["failed"]
        if not item or "deleted_at" in item:
            raise CounterNotFound(name)
        old_hwm = int(item["hwm"]["N"])
        if old_hwm > hwm:
            raise CounterWouldMoveBack(name, next_id, old_hwm + 1)
        raise NextBeyondMax(name, next_id, int(item["max_id"]["N"]))

    def delete(self, name: str) -> None:
        """Mark a counter deleted. Its item, and so its high-water mark, stays."""
        now = now_iso()
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=f"SET #deleted = :now, #updated = :now {_FORGET_ALLOCATION}",
            ConditionExpression=_LIVE,
            ExpressionAttributeNames=_names("#hwm", "#deleted", "#updated", *_ALLOCATION_NAMES),
            ExpressionAttributeValues={":now": _s(now)},
        )
        if "failed" in response:
            raise CounterNotFound(name)


class StaleToken(Exception):
    """The item carries this allocation's token from longer ago than the
    replay window: the token was reused, so a fresh one must be drawn."""


# -- list cursors --------------------------------------------------------------
# The cursor is DynamoDB's LastEvaluatedKey, which for this table is only the
# counter name. It is encoded so callers treat it as opaque, and checked on the
# way back in so a forged cursor is a 400, not a DynamoDB error.


def encode_cursor(key: Mapping[str, Any]) -> str:
    raw = json.dumps({"name": key["name"]["S"]}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    bad = InvalidInput("invalid_cursor", "cursor is not one this API returned")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        raise bad from None
    if not isinstance(data, dict) or set(data) != {"name"}:
        raise bad
    try:
        name = check_name(data["name"])
    except InvalidInput:
        raise bad from None
    return {"name": _s(name)}
