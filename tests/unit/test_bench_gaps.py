"""The simulation behind bench/gaps.py: it asks the client's own sizing code,
and what it says of a stop holds up to arithmetic."""

from __future__ import annotations

import random

import pytest

from bench import gaps
from bench.scale import Simulation
from idblocks.sizing import BlockSizer


def one_life(policy, rate, stop, drain_at=None, seed=1):
    sim = Simulation()
    process = gaps.Process(sim, policy, rate, stop, drain_at, random.Random(seed))
    sim.run(stop + 60.0)
    return process.finish()


def test_a_long_life_at_a_steady_rate_skips_at_most_one_and_a_half_runways_and_asks_a_block_a_runway():
    # 50 IDs/s for an hour: blocks of 5 s (250 IDs), the next asked for at half of each
    for policy in (gaps.TODAY, gaps.NEW):
        life = one_life(policy, 50.0, 3_600.0)
        assert life.skipped <= 1.5 * 250 + 1
        assert life.requests == pytest.approx(3_600 / 5, rel=0.02)


def test_draining_for_the_last_10_s_leaves_about_half_a_second_to_a_second_of_ids():
    for stop in (3_600.0, 3_601.3, 3_602.6, 3_604.9):
        life = one_life(gaps.NEW, 50.0, stop, drain_at=stop - 10.0)
        assert life.skipped <= 50.0
        assert life.longest_wait_draining == 0.0


def test_the_simulation_asks_the_clients_block_sizer(monkeypatch):
    """A BlockSizer patched to always say 50 makes an hour at 50 IDs/s cost
    one request a second."""
    monkeypatch.setattr(BlockSizer, "next_size", lambda self, held=0: 50)
    life = one_life(gaps.NEW, 50.0, 3_600.0)
    assert life.requests == pytest.approx(3_600, rel=0.01)


def test_todays_policy_is_a_first_block_of_100_without_the_start_bound():
    today, new = gaps.sizing_sequence(gaps.TODAY), gaps.sizing_sequence(gaps.NEW)
    assert (today.sizer.last, today.sizer.bounded) == (100, False)
    assert (new.sizer.last, new.sizer.bounded) == (16, True)


def test_a_young_process_is_held_to_what_it_used():
    # 1,000 IDs/s stopped after 0.5 s: today holds its first 100 and the 800
    # asked for next; the new policy at most what it used (about 500)
    today, new = one_life(gaps.TODAY, 1_000.0, 0.5), one_life(gaps.NEW, 1_000.0, 0.5)
    assert today.skipped >= 400
    assert new.skipped <= 500
