"""Property-based tests of the core (hypothesis), on moto's in-process
DynamoDB, single-threaded.

A state machine drives random sequences of allocations, creates, raises,
deletes and re-creates over a few counters, and checks after every step that
no ID was handed out twice and that each counter's state agrees with a
simple model. Validation is fuzzed with arbitrary JSON-like values: it
answers InvalidInput or accepts, and never raises anything else.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain import errors, rules
from idblocks_core.logic.admin import CounterAdmin
from idblocks_core.logic.allocation import IdAllocator
from tests.conftest import TABLE_NAMES, reset_core_caches
from tests.support.moto_tables import counters_table_started

NAMES = st.sampled_from(["a", "b"])
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


class CounterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        reset_core_caches()
        self.mock, client = counters_table_started()
        store = CounterStore(TABLE_NAMES["CountersTable"], client=client)
        self.allocator = IdAllocator(
            store,
            auto_create=True,
            max_batch_size=50,
            replay_window=timedelta(hours=1),
            idempotency_table=TABLE_NAMES["IdempotencyTable"],
        )
        self.admin = CounterAdmin(store)
        self.handed_out: set[tuple[str, int]] = set()
        # model: per name, the next ID and the max, or None while deleted/absent
        self.next: dict[str, int] = {}
        self.max: dict[str, int] = {}
        self.live: set[str] = set()

    def teardown(self) -> None:
        self.mock.stop()
        reset_core_caches()

    def _hand_out(self, name: str, start: int, end: int) -> None:
        for i in range(start, end + 1):
            assert (name, i) not in self.handed_out, f"{name}: {i} handed out twice"
            self.handed_out.add((name, i))

    @rule(name=NAMES, count=st.integers(1, 50))
    def allocate(self, name: str, count: int) -> None:
        try:
            block = self.allocator.take_block(name, count)
        except errors.CounterExhausted:
            assert name in self.live
            assert self.next[name] + count - 1 > self.max[name]
            return
        except errors.CounterNotFound:  # deleted: only an admin's create brings it back
            assert name in self.next
            assert name not in self.live
            return
        expected_start = self.next.get(name, 1)
        if name not in self.live:  # auto-created: it never existed
            assert name not in self.next
            self.max[name] = rules.DEFAULT_MAX_ID
            self.live.add(name)
        assert block.start == expected_start
        assert block.end == block.start + count - 1 <= self.max[name]
        self._hand_out(name, block.start, block.end)
        self.next[name] = block.end + 1

    @rule(name=NAMES, start=st.none() | st.integers(1, 120), max_id=st.none() | st.integers(1, 400))
    def create(self, name: str, start: int | None, max_id: int | None) -> None:
        try:
            counter = self.admin.create(name, start, max_id)
        except errors.InvalidInput:
            assert start is not None
            assert start > (max_id or rules.DEFAULT_MAX_ID)
            return
        except errors.CounterExists:
            assert name in self.live
            return
        except errors.BelowHighWaterMark:
            assert name in self.next
            assert name not in self.live
            return
        assert name not in self.live
        expected = start if start is not None else self.next.get(name, 1)
        assert counter.next == expected >= self.next.get(name, 1)
        self.next[name], self.max[name] = counter.next, counter.max
        self.live.add(name)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def raise_next(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        target = data.draw(st.integers(1, self.next[name] + 100))
        try:
            counter = self.admin.set_next(name, target)
        except errors.CounterWouldMoveBack:
            assert target < self.next[name]
            return
        except errors.NextBeyondMax:
            assert target > self.max[name] + 1
            return
        assert counter.next == target >= self.next[name]
        self.next[name] = target

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        try:
            self.admin.delete(name)
        except errors.CounterNotFound:
            assert name not in self.live
            return
        self.live.discard(name)

    @invariant()
    def stored_state_matches_the_model(self) -> None:
        for name in self.live:
            counter = self.admin.get(name)
            assert (counter.next, counter.max) == (self.next[name], self.max[name])


TestCounterMachine = CounterMachine.TestCase
TestCounterMachine.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
)


@given(value=JSONISH)
@settings(max_examples=300, deadline=None)
def test_validation_accepts_or_says_what_is_wrong(value):
    for check in (
        rules.check_name,
        rules.check_idempotency_key,
        rules.check_next,
        lambda v: rules.check_count(v, 1000),
        lambda v: rules.check_limit(v, 1000),
        lambda v: rules.check_new_counter(v, None),
        lambda v: rules.check_new_counter(None, v),
    ):
        try:
            check(value)
        except errors.InvalidInput as exc:
            refused = exc
        else:
            continue
        assert refused.code.startswith("invalid_")
        assert refused.message


@pytest.fixture
def bodies_api(api):
    return api


@given(body=JSONISH)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_batch_body_gets_a_4xx_or_a_block(bodies_api, table_snapshot, body):
    before = table_snapshot()
    reply = bodies_api.call("batch", name="fuzzed", body=body)
    assert reply.status in (200, 400), reply.body
    if reply.status == 400:
        assert set(reply.body["error"]) == {"code", "message"}
        assert table_snapshot() == before
    else:
        assert isinstance(body, dict)
        assert body.get("count") == reply.body["count"]
