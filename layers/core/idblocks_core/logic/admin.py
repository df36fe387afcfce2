"""Administering counters: create, list, read, move forward, delete.

Every operation validates its input before it touches the table, so bad
input changes nothing.
"""

from __future__ import annotations

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain.errors import BelowHighWaterMark, CounterDeleted, InvalidInput
from idblocks_core.domain.model import Counter
from idblocks_core.domain.rules import (
    LIST_LIMIT_MAX,
    check_cache,
    check_deleted,
    check_limit,
    check_name,
    check_new_counter,
    check_next,
)


class CounterAdmin:
    def __init__(self, store: CounterStore) -> None:
        self.store = store

    def create(self, name: str, start: object = None, max_id: object = None, cache: object = None) -> Counter:
        check_name(name)
        first, last = check_new_counter(start, max_id)
        cached = 1 if cache is None else check_cache(cache)
        try:
            return self.store.create(name, first or 1, last, cached)
        except CounterDeleted as gone:
            hwm = gone.high_water_mark
            if first is not None and first <= hwm:
                raise BelowHighWaterMark(name, "start", first, hwm) from None
            if last <= hwm:
                raise BelowHighWaterMark(name, "max", last, hwm) from None
            return self.store.revive(name, hwm, first or hwm + 1, last, cached)

    def get(self, name: str) -> Counter:
        return self.store.get(check_name(name))

    def list(
        self, limit: object = 100, cursor: str | None = None, deleted: object = False
    ) -> tuple[list[Counter], str | None]:
        """A page of counters; ``deleted``: deleted ones too, each with the
        mark it keeps (what a restore's recovery reads, docs/deploy.md)."""
        return self.store.list(check_limit(limit, LIST_LIMIT_MAX), cursor, deleted=check_deleted(deleted))

    def set_next(self, name: str, next_id: object) -> Counter:
        return self.update(name, next_id=next_id)

    def update(
        self, name: str, *, next_id: object = None, cache: object = None, deleted: object = False
    ) -> Counter:
        """PUT: move next forward, change the cache setting, or both at once.
        Environments holding cached blocks see the change once those drain
        or expire (logic/next_cache.py). With ``deleted``, next alone also
        raises the mark a deleted counter keeps, and it stays deleted."""
        check_name(name)
        if next_id is None and cache is None:
            raise InvalidInput("invalid_body", "request body must give next, cache or both")
        return self.store.update(
            name,
            next_id=None if next_id is None else check_next(next_id),
            cache=None if cache is None else check_cache(cache),
            deleted=check_deleted(deleted),
        )

    def delete(self, name: str) -> None:
        self.store.delete(check_name(name))
