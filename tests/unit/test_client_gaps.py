"""What a process skips when it stops: the first block, the start bound
(while young, what is held or was passed over never exceeds what was used,
with next_id, take and prefetch alike) and drain(), on MemoryBackends and
virtual clocks. The same against the dev server, as a
process sees it, is in tests/integration/test_client_devserver.py."""

from __future__ import annotations

import asyncio
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idblocks import AsyncSequence, Sequence
from idblocks.sizing import DRAIN_RUNWAY, INITIAL_BLOCK, BlockSizer, prefetch_tail
from idblocks.testing import THROTTLED, AsyncMemoryBackend, MemoryBackend
from tests.support.waiting import wait_until

# Stops on both sides of every block boundary of a burst, and far beyond.
STOPS = sorted({*range(1, 70), *(2**k + d for k in range(6, 21) for d in (-1, 0, 1)), 10_000, 1_000_000})


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_process_stopping_after_any_number_of_ids_skips_at_most_as_many(prefetch):
    # Given processes that take n IDs as fast as they come, then close
    for n in STOPS:
        backend = MemoryBackend()
        seq = Sequence(backend, "burst", prefetch=prefetch)
        for _ in range(n):
            seq.next_id()
        unused = seq.close()
        # Then the counter moved by n and what close counted, which is at most max(15, n)
        assert backend.blocks[-1].end == n + unused
        assert unused <= max(INITIAL_BLOCK - 1, n), (n, unused, backend.calls)


def test_an_asyncio_process_stopping_after_any_number_of_ids_skips_at_most_as_many():
    async def stop_after(n):
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "burst") as seq:
            for _ in range(n):
                await seq.next_id()
        return seq.unused_ids, backend.calls

    for n in STOPS:
        unused, requests = asyncio.run(stop_after(n))
        assert unused <= max(INITIAL_BLOCK - 1, n), (n, unused, requests)
        if n == 10_000:
            assert requests <= 12


def settled(seq: Sequence) -> None:
    """Until a block fetched ahead has landed: the prefetch had its moment."""
    assert wait_until(lambda: not (seq._signal.want or seq._fetching))  # white-box


@pytest.mark.parametrize("n", [20, 50])
@pytest.mark.parametrize("moment", [False, True], ids=["closed-at-once", "prefetch-landed"])
def test_one_id_and_a_take_then_close_skip_at_most_what_was_used(n, moment):
    """Reproduces: the README's example (next_id(), then take(20)) reported
    35 taken but not used after using 21, and next_id() with take(50) 65
    after 51, once the prefetch had a moment before close: the block asked
    for after the take was take's size, whatever the start bound allowed."""
    backend = MemoryBackend()
    seq = Sequence(backend, "example")
    seq.next_id()
    seq.take(n)
    if moment:
        settled(seq)
    unused = seq.close()
    assert unused <= 1 + n, [(block.start, block.end) for block in backend.blocks]
    assert backend.handed_out == 1 + n + unused


def test_an_asyncio_process_using_next_id_and_take_skips_at_most_what_it_used():
    async def example(n):
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "example") as seq:
            await seq.next_id()
            await seq.take(n)
            for _ in range(3):
                await asyncio.sleep(0)  # the block fetched ahead lands
        return seq.unused_ids

    assert asyncio.run(example(20)) <= 21
    assert asyncio.run(example(50)) <= 51


# A program: ("next", k) draws k IDs, ("take", n) one range, ("others", k)
# is another client taking k IDs (the next block does not continue), and
# "settle" lets a block fetched ahead land.
STEPS = st.one_of(
    st.tuples(st.just("next"), st.sampled_from([1, 3, 10, 30])),
    st.tuples(st.just("take"), st.sampled_from([1, 5, 20, 40, 50, 100, 300])),
    st.tuples(st.just("others"), st.integers(1, 5)),
    st.just("settle"),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.lists(STEPS, min_size=1, max_size=12))
def test_next_id_take_and_prefetch_in_any_order_skip_at_most_what_was_used(program):
    """What a young process skips when it stops, whatever it draws, with
    prefetch, and with other clients of the counter between its blocks (so
    that take() passes IDs over): at most what it used, or 15."""
    backend = MemoryBackend()
    seq = Sequence(backend, "any")
    used = 0
    for step in program:
        if step == "settle":
            settled(seq)
        elif step[0] == "others":
            backend.answer("any", step[1], idempotency_key=f"other-{backend.calls}")
        elif step[0] == "next":
            used += len([seq.next_id() for _ in range(step[1])])
        else:
            used += len(seq.take(step[1]))
    settled(seq)  # the worst moment to stop: a block fetched ahead has landed
    unused = seq.close()
    assert unused <= max(INITIAL_BLOCK - 1, used), [(block.start, block.end) for block in backend.blocks]


def test_a_burst_asks_for_about_twice_as_many_each_time_11_requests_to_10000():
    backend = MemoryBackend()
    seq = Sequence(backend, "burst", prefetch=False)
    for _ in range(10_000):
        seq.next_id()
    seq.close()
    sizes = [len(block) for block in backend.blocks]
    assert sizes[0] == INITIAL_BLOCK
    assert len(sizes) == 11
    assert all(size >= sum(sizes[:i]) for i, size in enumerate(sizes) if i > 1)  # at least what came before


def test_a_script_that_knows_its_count_takes_one_block_and_skips_nothing():
    backend = MemoryBackend()
    with Sequence(backend, "script", initial_block=5_000, prefetch=False) as seq:
        ids = [seq.next_id() for _ in range(5_000)]
    assert (ids[-1], backend.calls, seq.unused_ids) == (5_000, 1, 0)


def test_the_start_bound_lets_a_steady_process_reach_a_runways_worth_then_stops_binding():
    # Given a process drawing 1,000 IDs/s on a virtual clock, without prefetch (exact)
    clock = [0.0]
    backend = MemoryBackend()
    seq = Sequence(backend, "steady", prefetch=False, clock=lambda: clock[0])
    for _ in range(30_000):
        seq.next_id()
        clock[0] += 0.001
    seq.close()
    sizes = [len(block) for block in backend.blocks]
    # Then it grew about twice a block, and since has asked for 5 s at 1,000 IDs/s
    assert sizes[-1] == pytest.approx(5_000, rel=0.05)
    assert len(sizes) <= 16


def test_a_capacity_refusal_lifts_the_start_bound():
    # Given a young sequence whose rate asks for far more than it has used
    sizer = BlockSizer(16, 1, 1_000_000, 5.0)
    sizer.landed(16)
    sizer.observe(16, 0.001)  # 16,000 IDs/s
    assert sizer.next_size(held=0) == 16  # bound: used - held
    # When a request meets a capacity refusal (the counter is hot)
    sizer.contended(1)
    # Then the sizes grow as the rate says, max_growth times a block
    assert sizer.next_size(held=0) == 16 * 8 * 8
    assert sizer.young_tail() is None


def test_fixed_block_sizes_keep_their_prefetch_point():
    sizer = BlockSizer(100, 100, 100, 5.0)
    sizer.landed(100)
    assert sizer.young_tail() is None
    assert prefetch_tail(100, 0.3, None, None, sizer.young_tail()) == 30


def test_a_young_block_is_asked_for_late_enough_to_be_nearly_all_taken_before_it():
    sizer = BlockSizer(16, 1, 1_000_000, 5.0)
    sizer.landed(16)
    sizer.observe(16, 0.001)
    # With 1/32 of what was taken left (16 taken: one), the next block is 14 = 16 - 2 x 1
    assert prefetch_tail(16, 0.5, sizer.rate, 0.05, sizer.young_tail()) == 1
    assert sizer.next_size(held=1) == 14


def test_draining_sizes_blocks_for_half_a_second_at_the_rate_and_uses_what_is_held_first():
    # Given a process at 1,000 IDs/s for 20 s (blocks of 5 s by now), without prefetch (exact)
    clock = [0.0]
    backend = MemoryBackend()
    seq = Sequence(backend, "drain", prefetch=False, clock=lambda: clock[0])

    def steadily(seconds):
        for _ in range(int(seconds * 1_000)):
            seq.next_id()
            clock[0] += 0.001

    steadily(20.0)
    held_blocks = len(backend.blocks)
    assert len(backend.blocks[-1]) == pytest.approx(5_000, rel=0.05)
    # When it drains
    seq.drain()
    assert seq.draining
    steadily(8.0)
    # Then the block it held was used first, and every later one is half a second's worth
    later = [len(block) for block in backend.blocks[held_blocks:]]
    assert later
    assert all(size == pytest.approx(1_000 * DRAIN_RUNWAY, rel=0.05) for size in later)
    assert seq.close() <= 1_000 * DRAIN_RUNWAY


def test_drained_within_a_first_block_it_was_given_the_next_block_is_half_a_second_at_the_rate_so_far():
    """Reproduces: drained before its first block ran out (a block of 5 s at
    the rate it was given), a Sequence knew no rate, and its next block was
    the first one's size again: 5 s more to use before the small ones."""
    clock = [0.0]
    backend = MemoryBackend()
    seq = Sequence(backend, "first", initial_block=5_000, clock=lambda: clock[0])

    def draw(count):
        for _ in range(count):
            seq.next_id()
            clock[0] += 0.001  # 1,000 IDs/s

    draw(3_000)
    seq.drain()
    draw(1_900)  # past the prefetch mark (157 left), before the block runs out
    assert wait_until(lambda: len(backend.blocks) == 2)
    assert len(backend.blocks[1]) == pytest.approx(1_000 * DRAIN_RUNWAY, rel=0.05)
    seq.close()


def test_drain_is_harmless_twice_after_close_and_from_a_signal_handler():
    seq = Sequence(MemoryBackend(), "harmless")
    seq.next_id()
    previous = signal.signal(signal.SIGUSR1, lambda *_: seq.drain())
    try:
        signal.raise_signal(signal.SIGUSR1)  # handled at once, on this thread
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seq.draining
    seq.drain()
    assert seq.sizer.current_runway == DRAIN_RUNWAY
    unused = seq.close()
    seq.drain()  # closed: nothing changes, nothing is raised
    assert seq.unused_ids == unused


def test_a_draining_sequence_on_a_hot_counter_still_lengthens_its_runway():
    backend = MemoryBackend()
    seq = Sequence(backend, "hot", prefetch=False)
    seq.drain()
    backend.fail_next(1, THROTTLED)  # the block comes after one capacity refusal
    seq.next_id()
    assert seq.sizer.current_runway == DRAIN_RUNWAY * 2
    seq.close()
