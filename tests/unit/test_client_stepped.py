"""The client with a service that answers stepped blocks (RegionCount K > 1):
HttpBackend reads the step, Sequence hands out only the block's IDs, every
step-th one, and take(n) returns a stepped range."""

from __future__ import annotations

import sys

import pytest

from idblocks import HttpBackend, Sequence, UnexpectedResponse
from idblocks.block import Block
from idblocks.testing import MemoryBackend
from tests.support.stub_http import StubServer
from tests.unit.test_client_sequence import draw_in_threads


def test_http_backend_reads_the_step():
    """A batch answer with step 3 is a block of every third ID, count of them."""
    stepped = (200, {}, {"counter": "orders", "start": 101, "end": 398, "count": 100, "step": 3})
    with StubServer([stepped]) as stub:
        block = HttpBackend(stub.url).allocate("orders", 100, idempotency_key="k1")
    assert block == Block(101, 398, 3)
    assert len(block) == 100
    assert block.ids() == range(101, 399, 3)


def test_an_answer_without_step_is_consecutive():
    """A service from before regions existed sends no step: step 1."""
    plain = (200, {}, {"counter": "orders", "start": 1, "end": 10, "count": 10})
    with StubServer([plain]) as stub:
        block = HttpBackend(stub.url).allocate("orders", 10, idempotency_key="k1")
    assert (block, len(block)) == (Block(1, 10, 1), 10)


@pytest.mark.parametrize(("start", "end", "step"), [(1, 11, 3), (1, 10, 0), (1, 10, -1)])
def test_a_step_the_block_does_not_fit_is_refused(start, end, step):
    """end - start must be a multiple of a positive step; anything else is a
    service fault, never IDs the client guesses at."""
    body = {"counter": "orders", "start": start, "end": end, "count": 4, "step": step}
    with StubServer([(200, {}, body)]) as stub, pytest.raises(UnexpectedResponse, match="step"):
        HttpBackend(stub.url).allocate("orders", 4, idempotency_key="k1")


def test_sequence_hands_out_the_residue_in_order():
    """Region 2 of 3: 2, 5, 8, ... across blocks, nothing between."""
    with Sequence(MemoryBackend(start=2, step=3), "orders", block_size=7) as seq:
        ids = [seq.next_id() for _ in range(100)]
    assert ids == list(range(2, 2 + 300, 3))


@pytest.mark.parametrize("prefetch", [True, False])
def test_threads_get_unique_ids_of_the_residue_and_nothing_is_lost(prefetch):
    """As with consecutive blocks: unique, each thread increasing, every ID
    in the residue, and every ID handed out either used or reported unused."""
    backend = MemoryBackend(latency=0.0005, start=1, step=3)
    seq = Sequence(backend, "orders", block_size=97, prefetch=prefetch)
    results = draw_in_threads(seq, 8, 3000)
    unused = seq.close()
    every = [i for ids in results for i in ids]
    assert len(every) == len(set(every)) == 24_000
    assert all(i % 3 == 1 for i in every)
    assert all(ids == sorted(ids) for ids in results)
    assert backend.handed_out == len(every) + unused


def test_take_returns_a_stepped_range():
    """take() carves stepped ranges out of the segment and across segments."""
    seq = Sequence(MemoryBackend(start=3, step=3), "orders", block_size=100, prefetch_at=0.5)
    assert seq.next_id() == 3
    taken = seq.take(20)
    assert taken == range(6, 66, 3)
    assert seq.next_id() == 66
    across = seq.take(40)
    assert across == range(69, 189, 3)
    assert len(across) == 40
    assert [seq.next_id() for _ in range(38)] == list(range(189, 303, 3))
    seq.close()


def test_take_more_than_is_left_joins_the_next_stepped_block():
    """A block that continues the held IDs in the residue makes one run with them."""
    backend = MemoryBackend(start=1, step=4)
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    assert seq.next_id() == 1
    taken = seq.take(25)
    assert taken == range(5, 105, 4)
    assert [seq.next_id() for _ in range(9)] == list(range(105, 141, 4))
    assert seq.close() == 0
    assert backend.handed_out == 35


def test_take_skips_what_lies_below_a_later_stepped_block():
    """Another client's block in between: the IDs held below the new block
    are skipped and counted unused, never handed out after it."""
    backend = MemoryBackend(start=2, step=5)
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    assert seq.next_id() == 2
    backend.allocate("orders", 5, idempotency_key="another client")  # 52..72
    taken = seq.take(25)
    assert taken == range(77, 77 + 25 * 5, 5)
    assert seq.next_id() == 77 + 25 * 5
    assert seq.close() == 9 + 9


def test_stepped_ids_beyond_a_c_long_stay_in_the_residue():
    """Beyond sys.maxsize the segment is drawn by offsets; they must keep the step."""
    start = sys.maxsize + 2
    with Sequence(MemoryBackend(start=start, step=3, max_id=2**70), "big", block_size=10) as seq:
        ids = [seq.next_id() for _ in range(30)]
    assert ids == list(range(start, start + 90, 3))
