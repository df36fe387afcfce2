"""What the service does with counters, independent of HTTP.

Every operation validates its input before it touches the table, so bad input
changes nothing. Allocation never reads before it writes: one conditional
UpdateItem decides, and only when it is refused does the reason matter
(unknown name, deleted, exhausted).
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from datetime import timedelta

from idblocks_core.errors import BelowHighWaterMark, CounterDeleted, CounterExists, CounterNotFound
from idblocks_core.model import Block, Counter
from idblocks_core.rules import (
    DEFAULT_MAX_ID,
    check_count,
    check_limit,
    check_name,
    check_new_counter,
    check_next,
)
from idblocks_core.settings import Settings, get_settings
from idblocks_core.store import CounterStore, StaleToken

LIST_LIMIT_MAX = 1000

# Allocation may have to create (or revive) the counter first and then try
# again; a few rounds cover any interleaving with concurrent creates/deletes.
_ALLOCATION_ROUNDS = 4


class Counters:
    def __init__(
        self,
        store: CounterStore,
        *,
        auto_create: bool,
        max_batch_size: int,
        replay_window: timedelta,
    ) -> None:
        self.store = store
        self.auto_create = auto_create
        self.max_batch_size = max_batch_size
        self.replay_window = replay_window

    @classmethod
    def from_settings(cls, settings: Settings) -> Counters:
        return cls(
            CounterStore(settings.counters_table),
            auto_create=settings.auto_create_counters,
            max_batch_size=settings.max_batch_size,
            replay_window=timedelta(seconds=settings.idempotency_ttl_seconds),
        )

    def allocate(self, name: str, count: int, token: str | None = None) -> Block:
        """Hand out ``count`` consecutive IDs of counter ``name``.

        ``token`` identifies the request (derived from its Idempotency-Key):
        repeating an allocation with the same token, while nothing else has
        written to the counter, returns the same block rather than a new one.
        """
        self.check_allocation(name, count)
        token = token or uuid.uuid4().hex
        for round_ in range(_ALLOCATION_ROUNDS):
            last_round = round_ == _ALLOCATION_ROUNDS - 1
            try:
                return self.store.allocate(name, count, token, self.replay_window)
            except StaleToken:
                token = uuid.uuid4().hex
            except CounterDeleted as gone:
                if not self.auto_create or last_round:
                    raise
                self._revive_for_allocation(name, gone.high_water_mark)
            except CounterNotFound:
                if not self.auto_create or last_round:
                    raise
                self._create_for_allocation(name)
        raise AssertionError("unreachable: the last round re-raises")  # pragma: no cover

    def check_allocation(self, name: object, count: object) -> None:
        check_name(name)
        check_count(count, self.max_batch_size)

    def _create_for_allocation(self, name: str) -> None:
        # Created or deleted meanwhile: the next round sees which.
        with contextlib.suppress(CounterExists, CounterDeleted):
            self.store.create(name, 1, DEFAULT_MAX_ID)

    def _revive_for_allocation(self, name: str, hwm: int) -> None:
        with contextlib.suppress(CounterExists):  # revived by someone else meanwhile
            self.store.revive(name, hwm, hwm + 1, max(DEFAULT_MAX_ID, hwm))

    def create(self, name: str, start: object = None, max_id: object = None) -> Counter:
        check_name(name)
        first, last = check_new_counter(start, max_id)
        try:
            return self.store.create(name, first or 1, last)
        except CounterDeleted as gone:
            hwm = gone.high_water_mark
            if first is not None and first <= hwm:
                raise BelowHighWaterMark(name, "start", first, hwm) from None
            if last <= hwm:
                raise BelowHighWaterMark(name, "max", last, hwm) from None
            return self.store.revive(name, hwm, first or hwm + 1, last)

    def get(self, name: str) -> Counter:
        return self.store.get(check_name(name))

    def list(self, limit: object = 100, cursor: str | None = None) -> tuple[list[Counter], str | None]:
        return self.store.list(check_limit(limit, LIST_LIMIT_MAX), cursor)

    def set_next(self, name: str, next_id: object) -> Counter:
        check_name(name)
        return self.store.set_next(name, check_next(next_id))

    def delete(self, name: str) -> None:
        self.store.delete(check_name(name))


@functools.cache
def get_counters() -> Counters:
    return Counters.from_settings(get_settings())
