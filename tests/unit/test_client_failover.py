"""FailoverBackend: regional backends used as one, moving on when a region
is unavailable, with IDs unique because each region has its own residue."""

from __future__ import annotations

import pytest

from idblocks import CounterExhausted, FailoverBackend, Sequence, ServiceUnavailable
from idblocks.block import Block
from idblocks.testing import MemoryBackend
from tests.unit.test_client_sequence import draw_in_threads


def regions(k=3, **options):
    return [MemoryBackend(start=i if i else k, step=k, **options) for i in range(k)]


def test_an_unavailable_region_is_passed_over_and_the_next_one_kept():
    """Region 0 fails: the block comes from region 1, and so do the next ones."""
    a, b, c = regions()
    backend = FailoverBackend([a, b, c])
    a.fail_next(1)
    assert backend.allocate("orders", 2, idempotency_key="k1") == Block(1, 4, 3)
    assert backend.allocate("orders", 2, idempotency_key="k2") == Block(7, 10, 3)
    assert (a.calls, b.calls, c.calls, backend.failovers) == (1, 2, 0, 1)
    assert backend.current is b


def test_every_region_down_is_unavailable():
    a, b = regions(2)
    a.fail_next(1)
    b.fail_next(1)
    with pytest.raises(ServiceUnavailable, match="every region"):
        FailoverBackend([a, b]).allocate("orders", 1, idempotency_key="k1")
    assert (a.calls, b.calls) == (1, 1)


def test_an_answer_that_is_not_unavailability_is_not_failed_over():
    """An exhausted counter is exhausted: another region would only hide it."""
    a, b = regions(2, max_id=4)
    backend = FailoverBackend([a, b])
    backend.allocate("orders", 2, idempotency_key="k1")  # 2, 4: all of region 0
    with pytest.raises(CounterExhausted):
        backend.allocate("orders", 1, idempotency_key="k2")
    assert b.calls == 0


def test_no_backends_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        FailoverBackend([])


def test_threads_through_failing_regions_never_share_an_id():
    """Eight threads draw while regions fail in turn (lost answers included):
    every ID is unique and in the residue of the region that handed it out."""
    backends = regions(3, latency=0.0002)
    backends[0].fail_next(3)
    backends[1].fail_next(2, kind="lost_response")
    failover = FailoverBackend(backends)
    seq = Sequence(failover, "orders", block_size=50)
    results = draw_in_threads(seq, 8, 1000)
    unused = seq.close()
    every = [i for ids in results for i in ids]
    assert len(every) == len(set(every)) == 8000
    handed = {i: r for r, b in enumerate(backends) for block in b.blocks for i in block.ids()}
    assert all(i % 3 == handed[i] for i in every)
    assert failover.failovers >= 1
    assert sum(b.handed_out for b in backends) >= len(every) + unused
