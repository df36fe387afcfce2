"""Administering counters: create, list, read, move forward, delete.

Every operation validates its input before it touches the table, so bad
input changes nothing.
"""

from __future__ import annotations

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain.errors import BelowHighWaterMark, CounterDeleted
from idblocks_core.domain.model import Counter
from idblocks_core.domain.rules import LIST_LIMIT_MAX, check_limit, check_name, check_new_counter, check_next


class CounterAdmin:
    def __init__(self, store: CounterStore) -> None:
        self.store = store

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
