"""Cached next as a state machine (hypothesis): three function environments,
each with the service's real policy, over the real store on moto's
in-process DynamoDB and one clock that the machine moves. Random sequences
of next in any environment, time passing (less than a block's life, or well
past it), and an admin's PUT of next or cache, DELETE and create.

After every step: no ID was handed out twice; each environment's IDs
increase; none is above what the counter has handed out; and after a PUT
of next (or a DELETE) no environment serves an ID below it (or at all)
more than a block's life after the change.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain import errors
from idblocks_core.logic.admin import CounterAdmin
from idblocks_core.logic.allocation import IdAllocator
from idblocks_core.logic.next_cache import BLOCK_LIFETIME_SECONDS, NextCache
from tests.conftest import TABLE_NAMES, reset_core_caches
from tests.support.moto_tables import counters_table_started
from tests.support.sequence_model import FakeClock

NAME = "members"
ENVIRONMENTS = 3


class CachedNextMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        reset_core_caches()
        self.mock, client = counters_table_started()
        self.store = CounterStore(TABLE_NAMES["CountersTable"], client=client)
        self.allocator = IdAllocator(
            self.store,
            auto_create=False,
            max_batch_size=50,
            replay_window=timedelta(hours=1),
            idempotency_table=TABLE_NAMES["IdempotencyTable"],
        )
        self.admin = CounterAdmin(self.store)
        self.clock = FakeClock()
        self.environments = [
            NextCache(self.allocator._reserve_for_next, self.store.still_last_allocation, clock=self.clock)
            for _ in range(ENVIRONMENTS)
        ]
        self.admin.create(NAME, None, None, 20)
        self.live = True
        self.served: set[int] = set()
        self.last_served: dict[int, int] = {}
        # The last PUT of next (the new next, when) and DELETE (when).
        self.floor: tuple[int, float] | None = None
        self.deleted_at: float | None = None

    def teardown(self) -> None:
        self.mock.stop()
        reset_core_caches()

    @rule(environment=st.integers(0, ENVIRONMENTS - 1), calls=st.integers(1, 6))
    def next(self, environment: int, calls: int) -> None:
        for _ in range(calls):
            try:
                served = self.environments[environment].next_id(NAME).id
            except errors.CounterNotFound:
                assert not self.live
                return
            assert served not in self.served, f"{served} handed out twice"
            self.served.add(served)
            assert served > self.last_served.get(environment, 0), "IDs of one environment went back"
            self.last_served[environment] = served
            if self.floor is not None and served < self.floor[0]:
                assert self.clock.now < self.floor[1] + BLOCK_LIFETIME_SECONDS, "a PUT unseen too long"
            if self.deleted_at is not None:
                assert self.clock.now < self.deleted_at + BLOCK_LIFETIME_SECONDS, "a DELETE unseen too long"

    @rule(seconds=st.sampled_from([0.01, 0.5, 5.0, 29.0, 59.9, 60.0, 61.0, 150.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @precondition(lambda self: self.live)
    @rule(ahead=st.integers(0, 30))
    def put_next(self, ahead: int) -> None:
        target = self.store.get(NAME).next + ahead
        self.admin.set_next(NAME, target)
        self.floor = (target, self.clock.now)

    @precondition(lambda self: self.live)
    @rule(cache=st.integers(1, 40))
    def put_cache(self, cache: int) -> None:
        self.admin.update(NAME, cache=cache)

    @precondition(lambda self: self.live)
    @rule()
    def delete(self) -> None:
        self.admin.delete(NAME)
        self.live, self.deleted_at = False, self.clock.now

    @precondition(lambda self: not self.live)
    @rule(cache=st.integers(1, 40))
    def create_again(self, cache: int) -> None:
        counter = self.admin.create(NAME, None, None, cache)
        assert counter.next > max(self.served, default=0)
        self.live, self.deleted_at = True, None

    @precondition(lambda self: self.live)
    @invariant()
    def no_id_served_is_one_the_counter_has_not_handed_out(self) -> None:
        assert max(self.served, default=0) < self.store.get(NAME).next


TestCachedNextMachine = CachedNextMachine.TestCase
TestCachedNextMachine.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
)
