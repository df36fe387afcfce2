"""The scale simulation's mechanics, on cases small enough to work out by
hand, and proof that it drives the client's and the service's real logic
(patch that logic and the figures change). No wall-clock time is checked:
the simulation runs in simulated time."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bench import scale
from bench.scale import MODES_BY_NAME, Lognormal, Model, Run, TokenBucket, simulate
from idblocks import sequence
from idblocks.sizing import BlockSizer
from idblocks_core.logic import next_cache

# Every latency fixed (sigma 0), so the arithmetic below holds exactly: a
# keyed block request takes 20 ms (gateway) + 2 ms (handler, twice) + 15 ms
# (three DynamoDB calls) = 37 ms, far less than a block lasts.
FIXED = Model(
    gateway=Lognormal(0.020, 0.0),
    handler=Lognormal(0.001, 0.0),
    dynamodb=Lognormal(0.005, 0.0),
    cold_start=Lognormal(0.300, 0.0),
    block_rate=1_000.0,
    block_run=Run(ramp=0.0, warm_up=10.0, end=40.0),
    next_run=Run(ramp=0.0, warm_up=2.0, end=12.0),
)


def test_the_bucket_never_admits_more_than_its_burst_plus_its_rate_in_any_window():
    """Under random overload, every window [a, b] between two admissions
    holds at most burst + rate * (b - a) of them, and the long-run rate is
    the budget."""
    rng = random.Random(7)
    bucket = TokenBucket(rate=50.0, capacity=10.0)
    now, admitted = 0.0, []
    for _ in range(20_000):
        now += rng.expovariate(400.0)  # eight times the budget
        if bucket.admit(now):
            admitted.append(now)
    for i, start in enumerate(admitted):
        for j in range(i, min(len(admitted), i + 200)):
            assert j - i + 1 <= 10.0 + 50.0 * (admitted[j] - start) + 1e-9
    assert len(admitted) == pytest.approx(50.0 * now + 10.0, abs=2)


def test_the_bucket_admits_a_full_burst_then_its_rate():
    bucket = TokenBucket(rate=10.0, capacity=3.0)
    assert [bucket.admit(1.0) for _ in range(4)] == [True, True, True, False]
    assert not bucket.admit(1.05)
    assert bucket.admit(1.1)


@pytest.mark.parametrize(("clients", "writes"), [(1, 10.0), (10, 100.0)])
def test_fixed_blocks_of_100_cost_rate_over_100_writes(clients, writes):
    """1,000 IDs/s per client in blocks of 100: rate / 100 writes a second
    per client, all demand met and, with prefetch (a block lasts 100 ms, a
    request 37 ms), no ID ever waited for once running."""
    figures = simulate(MODES_BY_NAME["client_fixed_100"], clients, FIXED)
    assert figures["item_writes_per_s"] == pytest.approx(writes, abs=0.05 * clients)
    assert figures["ids_per_s"] == pytest.approx(1_000 * clients, rel=1e-6)
    assert figures["demand_met_pct"] == pytest.approx(100.0)
    assert figures["p999_wait_ms"] == 0.0
    assert figures["requests_throttled_pct"] == 0.0
    # At the end each client holds what is left of one block, and the next
    # one already fetched: at most two blocks.
    assert 0 <= figures["unused_ids_at_end"] <= 200 * clients


def test_uncached_next_over_the_budget_is_throttled_and_never_exceeds_it():
    """A budget of 10 writes/s and one caller wanting 50 IDs/s, one write
    each: the item admits its budget (plus at most its burst over the
    window), the rest is answered 503 and demand goes unmet."""
    model = Model(
        gateway=FIXED.gateway,
        handler=FIXED.handler,
        dynamodb=FIXED.dynamodb,
        cold_start=FIXED.cold_start,
        write_budget=10.0,
        burst=10.0,
        next_rate=50.0,
        next_run=Run(ramp=0.0, warm_up=5.0, end=25.0),
    )
    figures = simulate(MODES_BY_NAME["next"], 1, model)
    assert figures["item_writes_per_s"] <= 10.0 + 10.0 / 20.0
    assert figures["item_writes_per_s"] >= 9.0
    assert figures["requests_throttled_pct"] > 10.0
    assert figures["write_attempts_throttled_pct"] > 10.0
    assert figures["ids_per_s"] <= 10.5
    assert figures["demand_met_pct"] < 30.0


def test_uncached_next_under_the_budget_writes_once_per_id_and_is_never_throttled():
    model = Model(next_rate=50.0, next_run=Run(ramp=0.0, warm_up=5.0, end=25.0))
    figures = simulate(MODES_BY_NAME["next"], 1, model)
    assert figures["requests_throttled_pct"] == 0.0
    assert figures["item_writes_per_s"] == pytest.approx(figures["ids_per_s"], abs=1.0)
    assert figures["demand_met_pct"] == pytest.approx(100.0, abs=3.0)
    assert figures["unused_ids_at_end"] == 0


def test_the_sizes_come_from_the_clients_block_sizer(monkeypatch):
    """Adaptive blocks at 1,000 IDs/s grow to seconds' worth: well under one
    write a second. A BlockSizer patched to always say 50 makes the same run
    cost 1,000 / 50 = 20 writes a second: the simulation asks the real one."""
    real = simulate(MODES_BY_NAME["client_adaptive"], 1, FIXED)
    assert real["item_writes_per_s"] < 1.0
    monkeypatch.setattr(BlockSizer, "next_size", lambda self, held=0: 50)
    patched = simulate(MODES_BY_NAME["client_adaptive"], 1, FIXED)
    assert patched["item_writes_per_s"] == pytest.approx(20.0, abs=0.1)


def test_the_prefetch_decision_is_the_sequences_own(monkeypatch):
    """The simulation and Sequence share one prefetch_tail. Patched to ask
    only once a block is used up (no prefetch), each block of 100 leaves the
    demand of one request's 37 ms waiting: a p99.9 of 37 ms; with the real
    one, nothing waits."""
    assert scale.prefetch_tail is sequence.prefetch_tail
    assert simulate(MODES_BY_NAME["client_fixed_100"], 1, FIXED)["p999_wait_ms"] == 0.0
    monkeypatch.setattr(scale, "prefetch_tail", lambda size, prefetch_at, rate, latency, most=None: 0)
    patched = simulate(MODES_BY_NAME["client_fixed_100"], 1, FIXED)
    assert patched["p999_wait_ms"] == pytest.approx(37.0, abs=0.5)
    # Waiting demand is served when the block lands: it waits, but is met.
    assert patched["demand_met_pct"] == pytest.approx(100.0, abs=0.5)


def test_cached_next_runs_the_services_policy_and_writes_once_per_cache(monkeypatch):
    """One environment (concurrency 1) with cache 100 and 10 IDs/s: blocks
    of 1 and 32 while it grows, then one write per 100 IDs, every write
    through NextCache's reserve, and fewer than one block left unused at the
    end."""
    calls = []
    original = next_cache.NextCache.next_id

    def counted(self, name):
        served = original(self, name)
        calls.append(served.from_memory)
        return served

    monkeypatch.setattr(next_cache.NextCache, "next_id", counted)
    model = Model(concurrency=1, next_rate=10.0, next_run=Run(ramp=0.0, warm_up=0.0, end=100.0))
    figures = simulate(MODES_BY_NAME["next_cache_100"], 1, model)
    served = figures["ids_per_s"] * 100  # over the whole run
    assert served == pytest.approx(1_000, rel=0.1)
    assert len(calls) == pytest.approx(served, abs=1)  # each ID through the policy
    assert calls.count(False) == pytest.approx(2 + (served - 33) / 100, abs=0.5)  # then a block per 100
    assert figures["item_writes_per_s"] * 100 == calls.count(False)
    assert 0 <= figures["unused_ids_at_end"] < 100
    assert figures["environments"] == 1


def test_cached_next_with_cache_1_is_uncached_next():
    """The policy with cache 1 writes once per ID, as next does today."""
    model = Model(next_rate=50.0, next_run=Run(ramp=0.0, warm_up=5.0, end=25.0))
    one = scale.Mode("next_cache_1", "cache 1", next_route=True, cache=1)
    figures = simulate(one, 1, model)
    assert figures["item_writes_per_s"] == pytest.approx(figures["ids_per_s"], abs=1.0)
    assert figures["unused_ids_at_end"] == 0


def test_a_run_is_reproducible_from_its_seed():
    mode = MODES_BY_NAME["next_cache_100"]
    first = simulate(mode, 10, FIXED, seed=1)
    again = simulate(mode, 10, FIXED, seed=1)
    other = simulate(mode, 10, Model(), seed=2)
    for figures in (first, again, other):
        figures.pop("wall_s")
    assert first == again
    assert first != other


def test_capacity_refusals_reach_the_clients_block_sizer(monkeypatch):
    """20 adaptive clients at 1,000 IDs/s with the default 5 s runway want 4
    writes a second from an item that admits 2. The simulation tells the
    real BlockSizer.contended how many attempts of each block request were
    refused, where a Sequence does: the runways lengthen, the throttling
    ends within the first minute and the item is written well under its
    budget. With contended patched to do nothing, the same run stays
    throttled to its end at the full budget."""
    model = replace(FIXED, write_budget=2.0, burst=2.0, block_run=Run(ramp=0.0, warm_up=60.0, end=120.0))
    told = []
    real_contended = BlockSizer.contended

    def recorded(self, refusals):
        told.append(refusals)
        real_contended(self, refusals)

    monkeypatch.setattr(BlockSizer, "contended", recorded)
    adapted = simulate(MODES_BY_NAME["client_adaptive"], 20, model)
    assert sum(told) > 0  # refusals were passed on, not just zeros
    assert len(told) >= adapted["block_requests"]  # once per answer, as Sequence._fetch does
    assert adapted["last_throttled_s"] < model.block_run.warm_up + 30
    assert adapted["item_writes_per_s"] < 1.0

    monkeypatch.setattr(BlockSizer, "contended", lambda self, refusals: None)
    deaf = simulate(MODES_BY_NAME["client_adaptive"], 20, model)
    assert deaf["last_throttled_s"] >= model.block_run.end
    assert deaf["item_writes_per_s"] == pytest.approx(2.0, abs=0.1)
    assert deaf["requests_throttled_pct"] > adapted["requests_throttled_pct"]
