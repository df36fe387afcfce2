"""The admin routes, end to end: create, get, list, set, delete."""

from __future__ import annotations

import pytest

from idblocks import Conflict, CounterNotFound


def test_a_counter_lives_through_every_admin_route(target, counter):
    """Given a fresh name, when it is created, read, listed, raised, refused a
    move back, deleted and re-created, then each step answers as documented
    and the re-created counter continues above every ID handed out."""
    admin = target.backend(admin=True)
    made = admin.create(counter, start=100)
    assert (made["name"], made["next"], made["exhausted"]) == (counter, 100, False)
    with pytest.raises(Conflict):
        admin.create(counter)
    assert admin.get(counter)["next"] == 100
    assert counter in names_listed(admin)
    assert target.backend().next(counter) == 100
    assert admin.set_next(counter, 500)["next"] == 500
    with pytest.raises(Conflict):
        admin.set_next(counter, 200)
    assert admin.get(counter)["next"] == 500
    admin.delete(counter)
    with pytest.raises(CounterNotFound):
        admin.get(counter)
    with pytest.raises(Conflict):
        admin.create(counter, start=100)  # below its high-water mark
    assert admin.create(counter)["next"] > 100
    admin.delete(counter)


def names_listed(admin) -> set[str]:
    names: set[str] = set()
    cursor = None
    for _ in range(1000):  # bounded: a stack shared with other runs may hold many counters
        page = admin.list(limit=100, cursor=cursor)
        names.update(c["name"] for c in page["counters"])
        cursor = page["cursor"]
        if cursor is None:
            return names
    raise AssertionError("the list did not end within 1000 pages")
