"""Handing out IDs through the public API and the idblocks client."""

from __future__ import annotations

import pytest

from idblocks import CounterExhausted, Sequence


def test_ids_increase_across_next_and_batch(target, created):
    """Given a counter, when next and batch alternate, then every ID is above
    the one before and none is skipped by a lone caller."""
    backend = target.backend()
    seen: list[int] = []
    for count in (1, 3, 1, 10, 1, 100):
        if count == 1:
            seen.append(backend.next(created))
        else:
            seen.extend(backend.allocate(created, count).ids())
    assert seen == list(range(1, len(seen) + 1))


def test_a_sequence_hands_out_increasing_ids(target, created):
    with Sequence(target.backend(), created, block_size=50) as seq:
        ids = [seq.next_id() for _ in range(300)]
    assert ids == sorted(set(ids))


def test_max_is_reached_exactly_then_exhausted(target, counter):
    """Given a counter with max 10, when 10 IDs are taken, then the next
    allocation is a 409 counter_exhausted and the counter says so."""
    admin = target.backend(admin=True)
    admin.create(counter, max_id=10)
    try:
        backend = target.backend()
        assert list(backend.allocate(counter, 7).ids()) == list(range(1, 8))
        with pytest.raises(CounterExhausted):
            backend.allocate(counter, 4)  # only 3 left: refused whole, nothing taken
        assert list(backend.allocate(counter, 3).ids()) == [8, 9, 10]
        with pytest.raises(CounterExhausted):
            backend.next(counter)
        state = admin.get(counter)
        assert (state["next"], state["exhausted"], state["max"]) == (None, True, 10)
    finally:
        admin.delete(counter)
