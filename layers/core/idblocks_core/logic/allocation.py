"""Handing out IDs: the use case behind next and batch, independent of HTTP.

Input is validated once, before anything is written, so bad input changes
nothing (and leaves no idempotency record behind that would turn its
corrected retry into a 422). Allocation never reads before it writes: one
conditional UpdateItem decides, and only when it is refused does the reason
matter (unknown name, deleted, exhausted).

With an Idempotency-Key, the block is taken with a token derived from
(caller, counter, key, count): if the write committed but the request failed
afterwards, the retry finds that write and returns its block instead of
taking a second one.

``next`` goes through the environment's NextCache (logic/next_cache.py):
with a counter's cache at N it is answered from a block of N held in
memory, one write per N IDs; at 1 (the default) it is a write per ID, as
without a cache. ``batch`` never is: a caller asking for a block gets its
own write.

Every request that is handed IDs leaves one allocation record, a log line
(see ``_record``): which IDs of which counter, to whom, through which route
and key, fresh or replayed. It is what answers "who took ID X" from
CloudWatch Logs (the saved queries in template.yaml); a failed request is
handed nothing and leaves none.

Every fresh allocation is refused, taking nothing, where the counter is
behind an ID this environment already took from it: its item moved back
(logic/taken_marks.py says how, and what that check cannot see).

The time a request spends in DynamoDB (every call, retries included) is in
its record and, when it made any call, in the DynamoDbLatency metric of its
route, failed requests included: what a trace's DynamoDB subsegment showed,
without a tracing SDK in the function.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from idblocks_core.dal.counter_store import CounterStore, StaleToken
from idblocks_core.dal.dynamodb import DynamoDbTime, timed_calls
from idblocks_core.domain.errors import CounterDeleted, CounterExists, CounterMovedBack, CounterNotFound
from idblocks_core.domain.model import Block
from idblocks_core.domain.rules import DEFAULT_MAX_ID, check_count, check_idempotency_key, check_name
from idblocks_core.logic.next_cache import NextCache, Served
from idblocks_core.logic.taken_marks import TakenMarks
from idblocks_core.observability import logger, metrics

# Allocation may have to create the counter first and then try again; a few
# rounds cover any interleaving with concurrent creates and deletes.
_ALLOCATION_ROUNDS = 4

# The one route answered from cached blocks, one ID at a time.
CACHED_ROUTE = "next"

# The token of the keyed request being served, if any: a block the cache
# takes for it is written with it, so a retry of a request whose write
# committed finds that write (see _reserve_for_next).
_REQUEST_TOKEN: ContextVar[str | None] = ContextVar("request_token", default=None)

# The message of every allocation record: what the saved queries filter on.
ALLOCATION_RECORD = "allocation"

# Where the IDs a request is handed came from (the record's ``served_from``).
FROM_WRITE = "write"  # a write to the counter, for this request
FROM_MEMORY = "memory"  # a block this environment holds (cached next)
FROM_IDEMPOTENCY_RECORD = "idempotency_record"  # a keyed request answered again


@dataclass(frozen=True)
class _Handed:
    block: Block
    source: str


# What the keyed step handed out, when it ran: unset, the idempotency
# record answered instead, without running it.
_HANDED_BY_STEP: ContextVar[_Handed | None] = ContextVar("handed_by_step", default=None)


def new_token() -> str:
    """A fresh token for an allocation without a key: 128 bits from the
    kernel, drawn per request (never before a fork or a snapshot). Not
    uuid4, whose object costs three times the draw on every request."""
    return os.urandom(16).hex()


def allocation_token(caller: str, counter: str, key: str, count: int) -> str:
    return hashlib.sha256(f"{caller}\n{counter}\n{key}\n{count}".encode()).hexdigest()


# Why next or batch found no counter where the deployment creates none on use.
NOT_CREATED_ON_USE = "next and batch create none here: AutoCreateCounters is false"


class IdAllocator:
    def __init__(
        self,
        store: CounterStore,
        *,
        auto_create: bool,
        max_batch_size: int,
        replay_window: timedelta,
        idempotency_table: str,
    ) -> None:
        self.store = store
        self.auto_create = auto_create
        self.max_batch_size = max_batch_size
        self.replay_window = replay_window
        self.idempotency_table = idempotency_table
        self._once: Callable[..., dict[str, int]] | None = None
        self._idempotency_config: Any = None
        self.next_cache = NextCache(self._reserve_for_next, store.still_last_allocation)
        # What this environment took from each counter, to refuse one that moved back.
        self.taken = TakenMarks()

    def hand_out(
        self,
        name: object,
        count: object,
        *,
        route: str,
        caller: str,
        key: str | None = None,
        invocation: Any = None,
    ) -> Block:
        """``count`` IDs of counter ``name`` for ``route``, consecutive in this
        deployment's residue (``step`` apart); with a
        ``key``, the block an earlier request of the same caller, counter,
        key and count got, if there was one."""
        name = check_name(name)
        count = check_count(count, self.max_batch_size)
        if key is not None:
            key = check_idempotency_key(key)
        # Every metric of the request is by route.
        metrics.add_dimension(name="route", value=route)
        with timed_calls() as dynamodb:
            try:
                if key is None:
                    handed = self._allocate(name, count, route)
                    replayed = False  # no earlier request can have had these IDs
                else:
                    handed = self._hand_out_keyed(name, count, route, caller, key, invocation)
                    replayed = handed.source == FROM_IDEMPOTENCY_RECORD or handed.block.replayed
            finally:
                if dynamodb.calls:
                    metrics.add_metric(
                        name="DynamoDbLatency", unit=MetricUnit.Milliseconds, value=dynamodb.milliseconds
                    )
        self._record(
            handed,
            name,
            route=route,
            caller=caller,
            key=key,
            replayed=replayed,
            invocation=invocation,
            dynamodb=dynamodb,
        )
        return handed.block

    def _hand_out_keyed(
        self, name: str, count: int, route: str, caller: str, key: str, invocation: Any
    ) -> _Handed:
        request = {"caller": caller, "counter": name, "key": key, "count": count}
        once = self._idempotent_step()
        self._idempotency_config.register_lambda_context(invocation)
        # Imported here, as the step is built: requests without a key (and
        # cold starts) skip loading the Idempotency utility.
        from idblocks_core.dal.idempotency import record_errors_as_domain_errors

        reset = _HANDED_BY_STEP.set(None)
        try:
            with record_errors_as_domain_errors():
                result = once(request=request, route=route)
            handed = _HANDED_BY_STEP.get()
        finally:
            _HANDED_BY_STEP.reset(reset)
        if handed is not None:
            return handed
        # Records written before regions existed have no step: they came from a single region.
        block = Block(result["start"], result["end"], step=result.get("step", 1))
        return _Handed(block, FROM_IDEMPOTENCY_RECORD)

    def _hand_out_once(self, request: dict[str, Any], route: str) -> dict[str, int]:
        """Runs only when no record of the request exists: what it returns is
        the record, answered again to the request's retries."""
        token = allocation_token(request["caller"], request["counter"], request["key"], request["count"])
        handed = self._allocate(request["counter"], request["count"], route, token=token)
        _HANDED_BY_STEP.set(handed)
        block = handed.block
        return {"start": block.start, "end": block.end, "step": block.step}

    def _allocate(self, name: str, count: int, route: str, token: str | None = None) -> _Handed:
        if route == CACHED_ROUTE and count == 1:
            # A keyed request's record keeps the ID it was served, cached or
            # not: its retries get that ID again, never a second one.
            reset = _REQUEST_TOKEN.set(token)
            try:
                return self._serve_next(name)
            finally:
                _REQUEST_TOKEN.reset(reset)
        block = self.take_block(name, count, token=token)
        self._count_fresh(block, name)
        return _Handed(block, FROM_WRITE)

    @staticmethod
    def _record(
        handed: _Handed,
        name: str,
        *,
        route: str,
        caller: str,
        key: str | None,
        replayed: bool,
        invocation: Any,
        dynamodb: DynamoDbTime,
    ) -> None:
        """The allocation record: one log line per request handed IDs, its
        fields as keys (never formatted into the message) so Logs Insights
        filters and sums them. ``replayed``: an earlier attempt of the same
        keyed request took these IDs, and this answer repeats them. No key is
        an empty string, which no key can be: the Logger drops keys whose
        value is None, and a query then could not tell "none" from "absent".
        ``dynamodb_calls`` and ``dynamodb_ms``: the DynamoDB calls the request
        made and their time, retries included (none for an ID served from
        memory)."""
        block = handed.block
        logger.info(
            ALLOCATION_RECORD,
            extra={
                "counter": name,
                "first_id": block.start,
                "last_id": block.end,
                "count": block.count,
                "step": block.step,
                "route": route,
                "caller": caller,
                "idempotency_key": "" if key is None else key,
                "replayed": replayed,
                "served_from": handed.source,
                # Lambda's id of the invocation (API Gateway's is the
                # Logger's correlation_id, on every line it writes).
                "request_id": getattr(invocation, "aws_request_id", None),
                "dynamodb_calls": dynamodb.calls,
                "dynamodb_ms": dynamodb.milliseconds,
            },
        )

    def _serve_next(self, name: str) -> _Handed:
        served: Served = self.next_cache.next_id(name)
        if served.taken is None:
            metrics.add_metric(name="IdsServedFromCache", unit=MetricUnit.Count, value=1)
            return _Handed(Block(served.id, served.id, step=self.store.step), FROM_MEMORY)
        self._count_fresh(served.taken, name)
        if served.taken.count > 1 and not served.taken.replayed:
            metrics.add_metric(name="CacheBlocksTaken", unit=MetricUnit.Count, value=1)
        block = Block(served.id, served.id, replayed=served.taken.replayed, step=self.store.step)
        return _Handed(block, FROM_WRITE)

    def _reserve_for_next(self, name: str, count: int) -> Block:
        """The cache's reserve: a block of ``count`` IDs, at most the
        counter's cache setting, written with the keyed request's token if
        one is being served."""
        token = _REQUEST_TOKEN.get()
        block = self.take_block(name, count, token=token, cached_next=True)
        if block.replayed and token is not None and block.count > 1:
            # A keyed request's retry found the write of its first attempt,
            # which may have been another environment's: that environment
            # may still hold the rest of the block. Only the ID that attempt
            # was answered with is served again; the rest is not held here.
            return Block(block.start, block.start, replayed=True, step=block.step)
        return block

    def _idempotent_step(self) -> Callable[..., dict[str, int]]:
        if self._once is None:
            from aws_lambda_powertools.utilities.idempotency import idempotent_function

            from idblocks_core.dal import idempotency

            config = idempotency.idempotency_config(int(self.replay_window.total_seconds()))
            self._once = idempotent_function(
                data_keyword_argument="request",
                persistence_store=idempotency.persistence_layer(self.idempotency_table, self.store.client),
                config=config,
                key_prefix=idempotency.KEY_PREFIX,
            )(self._hand_out_once)
            self._idempotency_config = config
        return self._once

    @staticmethod
    def _count_fresh(block: Block, name: str) -> None:
        """Metrics count IDs really allocated (by route, the request's
        dimension); the counter name
        stays out of the dimensions, where thousands of names would each
        become a billed metric."""
        if block.replayed:  # handed out, and counted, by the write it repeats
            return
        metrics.add_metric(name="IdsAllocated", unit=MetricUnit.Count, value=block.count)
        metrics.add_metric(name="BlocksAllocated", unit=MetricUnit.Count, value=1)
        if block.range_left_percent is not None:
            # One metric for every counter, its minimum alarmed on; the name
            # rides along in the log line, not as a billed dimension.
            metrics.add_metric(
                name="CounterRangeLeftPercent", unit=MetricUnit.Percent, value=block.range_left_percent
            )
            metrics.add_metadata(key="counter", value=name)

    def take_block(
        self, name: str, count: int, token: str | None = None, *, cached_next: bool = False
    ) -> Block:
        """Take ``count`` IDs of a checked name and count (``cached_next``:
        refused where the counter's cache setting is smaller), creating the
        counter first if it never existed and the deployment allows it. A
        deleted counter stays deleted: its owner (an admin) deleted it, and
        only an admin's create brings it back; a client's next or batch
        answers counter_not_found.

        ``token`` identifies the request (derived from its Idempotency-Key):
        repeating an allocation with the same token, while nothing else has
        written to the counter, returns the same block rather than a new one.

        A counter behind what this environment already took from it is
        refused (CounterMovedBack, logged and counted) and nothing is taken
        (logic/taken_marks.py).
        """
        keyed, token = token is not None, token or new_token()
        # Read before the write: only what was applied before it counts.
        taken_up_to = self.taken.mark(name)
        for round_ in range(_ALLOCATION_ROUNDS):
            last_round = round_ == _ALLOCATION_ROUNDS - 1
            try:
                block = self.store.reserve_block(
                    name,
                    count,
                    token,
                    self.replay_window,
                    cached_next=cached_next,
                    keyed=keyed,
                    taken_up_to=taken_up_to,
                )
            except CounterMovedBack as refused:
                self._report_moved_back(refused)
                raise
            except StaleToken:
                keyed, token = False, new_token()
            except CounterDeleted:
                raise
            except CounterNotFound as missing:
                if not self.auto_create:
                    raise CounterNotFound(name, NOT_CREATED_ON_USE) from missing
                if last_round:
                    raise
                self._create_for_allocation(name)
            else:
                if not block.replayed:  # a replay repeats an earlier request's block
                    self.taken.took(name, block.end)
                return block
        raise AssertionError("unreachable: the last round re-raises")  # pragma: no cover

    @staticmethod
    def _report_moved_back(refused: CounterMovedBack) -> None:
        """Loud: an operator must move the counter above every ID it handed
        out before anyone uses it again (CounterMovedBackAlarm fires on one)."""
        logger.error(
            "counter moved back: allocation refused",
            counter=refused.name,
            first_id=refused.first_id,
            last_id=refused.last_id,
            taken_up_to=refused.taken_up_to,
        )
        metrics.add_metric(name="CounterMovedBack", unit=MetricUnit.Count, value=1)
        metrics.add_metadata(key="counter", value=refused.name)

    def _create_for_allocation(self, name: str) -> None:
        # Created or deleted meanwhile: the next round sees which.
        with contextlib.suppress(CounterExists, CounterDeleted):
            self.store.create(name, 1, DEFAULT_MAX_ID)
