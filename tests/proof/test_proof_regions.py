"""Regions never share an ID: every region count and residue, drawn to
exhaustion against the store. A proof rather than a unit test: it runs
thousands of allocations (several seconds), so it lives with the proofs."""

from __future__ import annotations

import random

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain import errors
from tests.conftest import TABLE_NAMES
from tests.unit.test_core import WINDOW


def test_regions_never_share_an_id(dynamodb):
    """K = 1..5, every residue, random block sizes until each region's
    counter is exhausted under one max: every ID lies in its region's residue,
    within max, and no ID appears twice across the regions."""
    rng = random.Random(7)
    for step in range(1, 6):
        seen: set[int] = set()
        for residue in range(step):
            name = f"c-{step}-{residue}"
            store = CounterStore(TABLE_NAMES["CountersTable"], step=step, residue=residue)
            store.create(name, 1, 200)
            for round_ in range(200):
                try:
                    block = store.reserve_block(name, rng.randint(1, 9), f"t{round_}", WINDOW)
                except errors.CounterExhausted:
                    continue
                ids = range(block.start, block.end + 1, block.step)
                assert len(ids) == block.count
                assert block.step == step
                assert all(i % step == residue and 1 <= i <= 200 for i in ids)
                assert seen.isdisjoint(ids)
                seen.update(ids)
        # Together the regions hand out (almost) every ID: a region leaves at
        # most a block's worth unused when its last request is too big.
        assert len(seen) >= 200 - step * 8
