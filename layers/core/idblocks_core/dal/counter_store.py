"""The counters table: the counter store, its item layout and every write
it makes. Its calls go through dal/dynamodb.py, which owns the client, the
invocation's deadline, retries and the mapping of DynamoDB's errors.

One item per counter name:

    name        S  key
    hwm         N  high-water mark: the last ID handed out (the first ID less
                   step before any; it may be 0 or negative)
    room        N  how far hwm may still move: always max_id - hwm, kept in the
                   same writes as hwm
    max_id      N  the last ID the counter may hand out
    step        N  the region count K the counter was created (or revived) with
    residue     N  the residue it hands out: every ID is residue modulo step
                   (items written before regions existed have neither: 1 and 0)
    cache       N  the most IDs a function environment takes at a time for
                   next (the counter's cache setting; absent on items from
                   before it existed: 1)
    cache_span  N  cache * step, kept in the same writes as cache: the most a
                   cached next's allocation may add to hwm, read by the write
                   itself (a condition cannot multiply)
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

An allocation of n IDs is one conditional UpdateItem that ADDs n * step to
hwm and -n * step to room, on condition that the counter is live, room >=
n * step and the item's step and residue are the deployment's. DynamoDB
applies each item write atomically and in order, so every allocation gets its
own IDs, whatever the concurrency; as hwm starts in the residue and only ever
moves by multiples of step, every ID stays in it. ``room`` exists because a
condition cannot do arithmetic: ``hwm + n * step <= max_id`` is written as
``room >= n * step``.

A cached next's block of n IDs (on a counter whose cache is N) is the same
write with one more condition, cache_span >= n * step: the setting as it
stands when the write is applied is the most it takes, so a function
environment never reads the item to learn N, and a PUT of cache governs the
next block taken. The write's answer says N; a refusal says it too. An
environment whose block expired unused asks whether its write is still the
counter's last (still_last_allocation: hwm is still the block's end and the
token still the write's) before serving the rest.

A function environment that has taken IDs from a counter sends the highest
of them with every allocation (``taken_up_to``; logic/taken_marks.py keeps
them), and the write holds only while hwm is at or above it. A counter whose
item moved back (a table restored from a backup, an item lowered by hand)
refuses, whole, a block that would hand out IDs again: CounterMovedBack. As a
condition of the write itself, the refusal takes nothing and writes no token,
so no retry of the same Idempotency-Key can find the write and replay it.

Every error from DynamoDB leaves here as a domain error (dal/dynamodb.py's
``domain_error``); a refused condition is not an error but the item as it
was, from which the store says why it was refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from idblocks_core.dal.dynamodb import call, conditional_update, new_dynamodb_client, unanswered_attempts
from idblocks_core.domain.errors import (
    BelowHighWaterMark,
    CacheBelowCount,
    CounterDeleted,
    CounterExhausted,
    CounterExists,
    CounterMovedBack,
    CounterNotFound,
    CounterWouldMoveBack,
    InvalidInput,
    NextBeyondMax,
    RegionMismatch,
    ServiceUnavailable,
)
from idblocks_core.domain.model import Block, Counter
from idblocks_core.domain.rules import check_name, first_in_residue
from idblocks_core.observability import logger

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
    "#step": "step",
    "#residue": "residue",
    "#cache": "cache",
    "#span": "cache_span",
}
_LIVE = "attribute_exists(#hwm) AND attribute_not_exists(#deleted)"
# An admin write that finds the counter deleted (or re-created) under it
# tries again this many times: a create and a delete of one name would have
# to alternate faster than the writes for it to run out.
_ADMIN_ROUNDS = 3
# A counter's state when it is created (or revived): next ID, max, timestamps.
_NEW_STATE = (
    "SET #hwm = :hwm, #room = :room, #max = :max, #created = :now, #updated = :now,"
    " #step = :step, #residue = :residue, #cache = :cache, #span = :span"
)
_NEW_STATE_NAMES = ("#hwm", "#room", "#max", "#created", "#updated", "#step", "#residue", "#cache", "#span")
# Every write that is not an allocation ends with this (see the module docstring).
_FORGET_ALLOCATION = "REMOVE #token, #alloc_at"
_ALLOCATION_NAMES = ("#token", "#alloc_at")
# What every allocation sets besides hwm and room.
_ALLOCATED = "#updated = :now, #token = :token, #alloc_at = :now"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _names(*placeholders: str) -> dict[str, str]:
    return {p: _NAMES[p] for p in placeholders}


def _region_of(item: Mapping[str, Any]) -> tuple[int, int]:
    """The step and residue an item was created with; an item from before
    regions existed belongs to the single region."""
    if "step" not in item:
        return 1, 0
    return int(item["step"]["N"]), int(item["residue"]["N"])


def _range_left_percent(item: Mapping[str, Any]) -> float | None:
    """IDs left as a percentage of 1..max (the first ID is not kept, so a
    counter that started high reads lower than its own range: it alarms early,
    never late)."""
    if "max_id" not in item or "room" not in item:
        return None
    max_id = int(item["max_id"]["N"])
    return 100.0 * int(item["room"]["N"]) / max_id if max_id > 0 else 0.0


def _cache_of(item: Mapping[str, Any]) -> int:
    """A counter's cache setting; items from before it existed are uncached."""
    return int(item["cache"]["N"]) if "cache" in item else 1


def _cache_span_of(item: Mapping[str, Any], step: int) -> int:
    return int(item["cache_span"]["N"]) if "cache_span" in item else step


def _span_of_cached_write(found: str | None, token: str, step: int) -> int | None:
    """What a cached next's write carrying ``token`` added to hwm, if the
    item's token ``found`` is that write's (``token/count``); else None."""
    if found is None or not found.startswith(f"{token}/"):
        return None
    count = found[len(token) + 1 :]
    return int(count) * step if count.isdigit() else None


def _to_counter(item: Mapping[str, Any]) -> Counter:
    step, residue = _region_of(item)
    hwm = int(item["hwm"]["N"])
    deleted = "deleted_at" in item
    return Counter(
        name=item["name"]["S"],
        # A deleted counter's next is where a re-creation continues: one past
        # its mark, in the residue of whichever deployment re-creates it.
        next=hwm + 1 if deleted else hwm + step,
        max=int(item["max_id"]["N"]),
        created_at=item["created_at"]["S"],
        updated_at=item["updated_at"]["S"],
        step=step,
        residue=residue,
        cache=_cache_of(item),
        deleted=deleted,
    )


class CounterStore:
    def __init__(self, table_name: str, client: Any = None, *, step: int = 1, residue: int = 0) -> None:
        """``step`` and ``residue`` are the deployment's RegionCount and
        RegionIndex: it hands out only IDs congruent to residue modulo step,
        and only from counters created with the same two."""
        if step < 1 or not 0 <= residue < step:
            raise ValueError(f"residue must be from 0 to step - 1, step at least 1: {step=}, {residue=}")
        self.table_name = table_name
        self.client = client if client is not None else new_dynamodb_client()
        self.step = step
        self.residue = residue
        # A counter written before regions existed has neither attribute and
        # belongs to the single region.
        same_region = "#step = :step AND #residue = :residue"
        self._in_region = (
            f"(attribute_not_exists(#step) OR ({same_region}))" if step == 1 else f"({same_region})"
        )
        self._region_values = {":step": _n(step), ":residue": _n(residue)}

    def _new_state(self, first_id: int, max_id: int, cache: int) -> dict[str, dict[str, str]]:
        """A counter's values as created (or revived) here: it hands out this
        deployment's residue, from the first ID of it at or above ``first_id``."""
        hwm = first_in_residue(first_id, self.step, self.residue) - self.step
        return {
            ":hwm": _n(hwm),
            ":room": _n(max_id - hwm),
            ":max": _n(max_id),
            ":now": _s(now_iso()),
            ":cache": _n(cache),
            ":span": _n(cache * self.step),
            **self._region_values,
        }

    def _check_region(self, name: str, item: Mapping[str, Any]) -> None:
        step, residue = _region_of(item)
        if (step, residue) != (self.step, self.residue):
            raise RegionMismatch(name, step, residue, self.step, self.residue)

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """One DynamoDB call; every failure leaves as a domain error."""
        return call(self.client, self.table_name, operation, **kwargs)

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        """UpdateItem; when the condition does not hold, returns the item as it
        was (``{}`` if there is none) under ``"failed"`` instead of raising."""
        return conditional_update(self.client, self.table_name, **kwargs)

    # -- allocation ---------------------------------------------------------

    def reserve_block(
        self,
        name: str,
        count: int,
        token: str,
        replay_window: timedelta,
        *,
        cached_next: bool = False,
        keyed: bool = False,
        taken_up_to: int | None = None,
    ) -> Block:
        """Hand out the next ``count`` IDs of ``name``, or raise.

        ``token`` names this allocation. If call_dynamodb retries a write whose
        response was lost, the retry finds its own token on the item and
        returns the range that write took instead of taking a second one;
        ``replay_window`` bounds how old such a write may be.

        ``cached_next``: a block for an environment's cached next. Refused
        with CacheBelowCount where the counter's cache setting is below
        ``count``; the block says the setting the write saw (``Block.cache``).
        Its sizes vary, so the write carries ``token/count``. With ``keyed``
        (the token is a keyed request's, which a retry may send again from
        another environment, asking another size) a write whose token starts
        ``token/`` is this one's, and a retry gets the block it took, of the
        size it took.

        ``taken_up_to``: the highest ID the caller already took from the
        counter (logic/taken_marks.py). The write is refused with
        CounterMovedBack, taking nothing and leaving no token a retry could
        find, where the counter's last ID is below it: its next block would
        hand some of those IDs out again. As every ID of a counter is in its
        residue, hwm >= taken_up_to is "the block starts above it".
        """
        step = self.step
        span = count * step
        unanswered = unanswered_attempts()
        names: tuple[str, ...] = (
            "#hwm",
            "#room",
            "#updated",
            "#deleted",
            "#step",
            "#residue",
            *_ALLOCATION_NAMES,
        )
        values = {":now": _s(now_iso()), **self._region_values}
        if count == 1:
            # One ID moves hwm by step, a value every write carries already:
            # botocore's work for a request grows with each value it holds.
            amount = ":step"
            update = f"SET #hwm = #hwm + :step, #room = #room - :step, {_ALLOCATED}"
        else:
            amount = ":span"
            values |= {":span": _n(span), ":minus_span": _n(-span)}
            update = f"ADD #hwm :span, #room :minus_span SET {_ALLOCATED}"
        condition = f"{_LIVE} AND {self._in_region} AND #room >= {amount}"
        written = f"{token}/{count}" if cached_next else token
        values[":token"] = _s(written)
        if keyed and cached_next:
            values[":ours"] = _s(f"{token}/")
            condition += " AND (attribute_not_exists(#token) OR NOT begins_with(#token, :ours))"
        else:
            condition += " AND (attribute_not_exists(#token) OR #token <> :token)"
        if taken_up_to is not None:
            values[":taken"] = _n(taken_up_to)
            condition += " AND #hwm >= :taken"
        if cached_next and count > 1:
            # Any setting allows one ID; an item from before the setting has
            # no cache_span, reads as cache 1 and allows no more.
            condition += " AND #span >= :span"
            names += ("#span",)
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=_names(*names),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        if "failed" not in response:
            block = self._taken(response["Attributes"], span, written)
        else:
            block = self._refused_allocation(
                name, response["failed"], span, token, replay_window, cached_next, taken_up_to
            )
        return self._noting_gaps(name, block, unanswered)

    def still_last_allocation(self, name: str, end: int, token: str) -> bool:
        """Whether the allocation whose write carried ``token`` and took IDs
        up to ``end`` is still the last write to ``name``: the counter is
        live, nothing was allocated since (its high-water mark is still
        ``end``) and no admin wrote to it (every admin write removes the
        token). One conditional write that changes nothing: what it proves
        holds from the moment it is applied, so a block of those IDs held
        unused may be served for another lifetime from before it was sent."""
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression="SET #token = :token",
            ConditionExpression=f"{_LIVE} AND {self._in_region} AND #token = :token AND #hwm = :end",
            ExpressionAttributeNames=_names("#hwm", "#deleted", "#step", "#residue", "#token"),
            ExpressionAttributeValues={":token": _s(token), ":end": _n(end), **self._region_values},
        )
        return "failed" not in response

    def _noting_gaps(self, name: str, block: Block, unanswered: int) -> Block:
        """``block``, as the write took or found it. Each attempt of that write
        that went unanswered may have been applied, and if another allocation
        came in before the next attempt, the token it would be recognised by
        is gone: its IDs, below ``block``, are then held by no one (the last
        unanswered attempt of a replayed block is the one replayed). The store
        cannot tell which; it logs the most they can be, so that every such
        gap below a counter's high-water mark has a line that explains it."""
        lost = unanswered_attempts() - unanswered - block.replayed
        if lost > 0:
            logger.warning(
                "possible gap: unanswered attempts of this allocation may have taken IDs no one holds",
                counter=name,
                ids=lost * block.count,
                below=block.start,
            )
        return block

    def _taken(self, written: Mapping[str, Any], span: int, token: str) -> Block:
        """The block an allocation that added ``span`` to hwm with ``token``
        took, from the item as the write left it."""
        end, step = int(written["hwm"]["N"]), self.step
        return Block(
            end - span + step,
            end,
            step=step,
            range_left_percent=_range_left_percent(written),
            token=token,
            cache=_cache_of(written),
        )

    def _refused_allocation(
        self,
        name: str,
        item: Mapping[str, Any],
        span: int,
        token: str,
        replay_window: timedelta,
        cached_next: bool = False,
        taken_up_to: int | None = None,
    ) -> Block:
        """Why an allocation of ``span`` was refused, given the item as it
        was (``{}`` for none): raised as a domain error, or, when the item
        carries this allocation's own token, the block that write took
        (``cached_next``: of the size the token names)."""
        step = self.step
        count = span // step
        if not item:
            raise CounterNotFound(name)
        hwm = int(item["hwm"]["N"])
        # Deleted first: a deleted counter answers no replay, whatever it carries.
        if "deleted_at" in item:
            raise CounterDeleted(name, hwm)
        # Before the token: a replay from a counter of another residue would
        # still hand out IDs this deployment does not own.
        self._check_region(name, item)
        found = item.get("alloc_token", {}).get("S")
        taken = _span_of_cached_write(found, token, step) if cached_next else span if found == token else None
        if taken is not None:
            allocated_at = item.get("alloc_at", {}).get("S")
            # An item written before alloc_at existed cannot prove when its
            # token was written: a new block (a gap) is safe, a replay may not be.
            if allocated_at and datetime.now(UTC) - datetime.fromisoformat(allocated_at) <= replay_window:
                # Our own earlier write: it committed, only its answer was lost.
                return Block(
                    hwm - taken + step, hwm, replayed=True, step=step, token=found, cache=_cache_of(item)
                )
            raise StaleToken
        # Before the setting and the room: a counter behind what was taken
        # from it is the one thing an operator must hear about.
        if taken_up_to is not None and hwm < taken_up_to:
            raise CounterMovedBack(name, hwm + step, hwm + span, taken_up_to)
        if cached_next and _cache_span_of(item, step) < span:
            raise CacheBelowCount(name, count, _cache_of(item))
        raise CounterExhausted(name, count, hwm + step, int(item["max_id"]["N"]), step)

    # -- administration -----------------------------------------------------

    def create(self, name: str, first_id: int, max_id: int, cache: int = 1) -> Counter:
        """Create a counter that has never existed. Raises CounterExists, or
        CounterDeleted (with its high-water mark) for a deleted one."""
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=_NEW_STATE,
            ConditionExpression="attribute_not_exists(#name)",
            ExpressionAttributeNames=_names("#name", *_NEW_STATE_NAMES),
            ExpressionAttributeValues=self._new_state(first_id, max_id, cache),
            ReturnValues="ALL_NEW",
        )
        if "failed" in response:
            item = response["failed"]
            if "deleted_at" in item:
                raise CounterDeleted(name, int(item["hwm"]["N"]))
            raise CounterExists(name)
        return _to_counter(response["Attributes"])

    def revive(self, name: str, seen_hwm: int, first_id: int, max_id: int, cache: int = 1) -> Counter:
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
            ExpressionAttributeValues={**self._new_state(first_id, max_id, cache), ":seen": _n(seen_hwm)},
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

    def list(
        self, limit: int, cursor: str | None, *, deleted: bool = False
    ) -> tuple[list[Counter], str | None]:
        """One page of live counters (``deleted``: and of deleted ones, with
        the marks they keep), and the cursor of the next page (None at the
        end). A page may hold fewer than ``limit`` and still have a cursor
        when deleted counters were skipped."""
        start_key = decode_cursor(cursor) if cursor else None
        counters: list[Counter] = []
        # Each Scan call reads up to 1 MB; a few calls are enough to fill a
        # page unless the table is mostly deleted counters.
        for _ in range(8):
            kwargs: dict[str, Any] = {"Limit": limit - len(counters), "ConsistentRead": True}
            if not deleted:
                kwargs["FilterExpression"] = "attribute_not_exists(#deleted)"
                kwargs["ExpressionAttributeNames"] = _names("#deleted")
            if start_key:
                kwargs["ExclusiveStartKey"] = start_key
            response = self._call("scan", **kwargs)
            counters.extend(_to_counter(item) for item in response.get("Items", []))
            start_key = response.get("LastEvaluatedKey")
            if not start_key or len(counters) >= limit:
                break
        return counters, encode_cursor(start_key) if start_key else None

    def set_next(self, name: str, next_id: int) -> Counter:
        """Move a counter forward so that it next hands out ``next_id`` (or,
        with several regions, the first ID of this region's residue from it)."""
        return self.update(name, next_id=next_id)

    def update(
        self, name: str, *, next_id: int | None = None, cache: int | None = None, deleted: bool = False
    ) -> Counter:
        """Move a counter forward (``next_id``, as set_next) and/or change
        its cache setting, in one conditional write. Cached blocks already
        taken are not recalled: they stay unique (hwm never moves back) and
        are served until they drain or expire.

        ``deleted``: a deleted counter takes ``next_id`` alone, which raises
        the mark it keeps (see raise_kept_mark), and it stays deleted;
        without it, a deleted counter is CounterNotFound."""
        for _ in range(_ADMIN_ROUNDS):
            try:
                return self._update_live(name, next_id=next_id, cache=cache)
            except CounterDeleted:
                if not deleted or next_id is None or cache is not None:
                    raise CounterNotFound(name) from None
            try:
                return self.raise_kept_mark(name, next_id)
            except _RevivedMeanwhile:
                continue
        raise ServiceUnavailable(f"counter '{name}' was deleted and re-created under every try; try again")

    def raise_kept_mark(self, name: str, next_id: int) -> Counter:
        """Raise the high-water mark a deleted counter keeps so that a
        re-creation continues at ``next_id`` or above; it stays deleted. Raise
        only, as for a live counter: at or above ``next_id`` already is
        CounterWouldMoveBack, and nothing is written. A deleted counter hands
        out nothing, so its max does not bound the mark (a re-creation gives
        a max of its own, above the mark)."""
        hwm = next_id - 1
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=f"SET #hwm = :hwm, #room = #max - :hwm, #updated = :now {_FORGET_ALLOCATION}",
            ConditionExpression="attribute_exists(#deleted) AND #hwm <= :hwm",
            ExpressionAttributeNames=_names(
                "#hwm", "#room", "#max", "#updated", "#deleted", *_ALLOCATION_NAMES
            ),
            ExpressionAttributeValues={":hwm": _n(hwm), ":now": _s(now_iso())},
            ReturnValues="ALL_NEW",
        )
        if "failed" not in response:
            return _to_counter(response["Attributes"])
        item = response["failed"]
        if not item:
            raise CounterNotFound(name)
        if "deleted_at" not in item:
            raise _RevivedMeanwhile
        raise CounterWouldMoveBack(name, next_id, int(item["hwm"]["N"]) + 1)

    def _update_live(self, name: str, *, next_id: int | None, cache: int | None) -> Counter:
        """update's write to a live counter; CounterDeleted for a deleted one."""
        sets = ["#updated = :now"]
        condition = f"{_LIVE} AND {self._in_region}"
        names = ["#updated", "#deleted", "#hwm", "#step", "#residue", *_ALLOCATION_NAMES]
        values: dict[str, Any] = {":now": _s(now_iso()), **self._region_values}
        hwm = None
        if next_id is not None:
            hwm = first_in_residue(next_id, self.step, self.residue) - self.step
            sets += ["#hwm = :hwm", "#room = #max - :hwm"]
            condition += " AND #hwm <= :hwm AND #max >= :hwm"
            names += ["#room", "#max"]
            values[":hwm"] = _n(hwm)
        if cache is not None:
            sets += ["#cache = :cache", "#span = :span"]
            names += ["#cache", "#span"]
            values |= {":cache": _n(cache), ":span": _n(cache * self.step)}
        response = self._update(
            Key={"name": _s(name)},
            UpdateExpression=f"SET {', '.join(sets)} {_FORGET_ALLOCATION}",
            ConditionExpression=condition,
            ExpressionAttributeNames=_names(*dict.fromkeys(names)),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        if "failed" not in response:
            return _to_counter(response["Attributes"])
        item = response["failed"]
        if not item:
            raise CounterNotFound(name)
        if "deleted_at" in item:
            raise CounterDeleted(name, int(item["hwm"]["N"]))
        self._check_region(name, item)
        if hwm is None or next_id is None:  # pragma: no cover - a live counter of this region takes any cache
            raise AssertionError("only a move of next can be refused on a live counter")
        old_hwm = int(item["hwm"]["N"])
        if old_hwm > hwm:
            raise CounterWouldMoveBack(name, next_id, old_hwm + self.step)
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


class _RevivedMeanwhile(Exception):
    """A deleted counter's mark was to be raised, and it was re-created
    between the write that found it deleted and this one: update again."""


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
    except (binascii.Error, ValueError, TypeError):  # TypeError: a cursor given twice (a list)
        raise bad from None
    if not isinstance(data, dict) or set(data) != {"name"}:
        raise bad
    try:
        name = check_name(data["name"])
    except InvalidInput:
        raise bad from None
    return {"name": _s(name)}
