"""The embedded DynamoDB's per-item write budget, on a fake clock. What a
write over it gets from the server (DynamoDB's hot-key error, nothing
written) is in tests/integration/test_item_write_limit.py."""

from __future__ import annotations

import pytest

from localrun.dynamodb import ItemWriteLimit


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_is_per_item_and_per_second():
    """Writes past the budget in one second are refused, another item keeps
    its own budget, and the next second starts afresh."""
    clock = FakeClock()
    limit = ItemWriteLimit(3, clock)
    key = {"name": {"S": "hot"}}
    assert [limit.admit("t", key) for _ in range(4)] == [True, True, True, False]
    assert limit.admit("t", {"name": {"S": "cold"}})
    assert limit.admit("other", key)
    clock.now += 1
    assert limit.admit("t", key)
    assert limit.throttled == 1


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        ItemWriteLimit(0)
