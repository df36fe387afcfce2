"""AsyncSequence: Sequence's promises under asyncio. The same policy (block
sizes, prefetch, the request kept until answered, errors), waiting on the
event loop instead of a lock; callers cancelled or timed out at any point lose
nothing and repeat nothing. Each test runs its own loop (asyncio.run)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import random

import pytest

from idblocks import (
    AsyncFailoverBackend,
    AsyncSequence,
    CounterExhausted,
    CounterNotFound,
    SequenceClosed,
    ServiceUnavailable,
)
from idblocks.block import Block
from idblocks.testing import LOST_RESPONSE, THROTTLED, UNAVAILABLE, AsyncMemoryBackend

# Far longer than a request to AsyncMemoryBackend takes, even on a loaded
# machine: a caller that waits this long was left waiting for nothing.
ONE_REQUEST = 10.0


def run(coroutine):
    return asyncio.run(coroutine)


async def settled(seq: AsyncSequence) -> None:
    """Until the sequence's block request (if any) has its answer."""
    task = seq._request_task
    if task is not None:
        await asyncio.wait({task}, timeout=ONE_REQUEST)
    assert seq._request_task is None or seq._request_task is not task


def accounted(backend: AsyncMemoryBackend, handed: list[int], unused: int) -> None:
    """Every ID the backend allocated was handed out once or counted unused."""
    assert len(handed) == len(set(handed)), "an ID was handed out twice"
    assert backend.handed_out == len(handed) + unused, "IDs allocated but neither handed out nor counted"
    allocated = {i for block in backend.blocks for i in block_ids(block)}
    assert set(handed) <= allocated


def block_ids(block: Block) -> range:
    return block.ids()


def increasing(values: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


# -- handing out -----------------------------------------------------------------


def test_next_id_and_take_hand_out_increasing_ids_and_aclose_counts_the_rest():
    async def main():
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "orders", initial_block=10) as seq:
            ids = [await seq.next_id() for _ in range(25)]
            taken = await seq.take(30)
            after = await seq.next_id()
        return backend, seq, ids, taken, after

    backend, seq, ids, taken, after = run(main())
    assert ids == list(range(1, 26))
    assert taken == range(26, 56)
    assert after > taken[-1]
    accounted(backend, [*ids, *taken, after], seq.unused_ids)


def test_a_closed_sequence_hands_out_nothing_more():
    async def main():
        seq = AsyncSequence(AsyncMemoryBackend(), "orders", block_size=5)
        await seq.next_id()
        unused = await seq.aclose()
        with pytest.raises(SequenceClosed):
            await seq.next_id()
        with pytest.raises(SequenceClosed):
            await seq.take(2)
        return unused, await seq.aclose()

    assert run(main()) == (4, 4)


def test_take_validates_before_asking_anything():
    async def main():
        backend = AsyncMemoryBackend()
        seq = AsyncSequence(backend, "orders", max_batch=100)
        for bad in (0, -1, True, 1.5, 101):
            with pytest.raises(ValueError, match="n must be"):
                await seq.take(bad)
        await seq.aclose()
        return backend.calls

    assert run(main()) == 0


def test_the_next_block_is_prefetched_by_a_task_before_the_current_one_runs_out():
    async def main():
        backend = AsyncMemoryBackend(latency=0.01)
        seq = AsyncSequence(backend, "orders", block_size=10, prefetch_at=0.5)
        for _ in range(6):  # past the mark (5 of 10 left)
            await seq.next_id()
        await settled(seq)
        in_ready = len(seq._ready)
        await seq.aclose()
        return backend, in_ready

    backend, in_ready = run(main())
    assert backend.calls == 2
    assert in_ready == 1  # the second block landed while 4 IDs were still held


def test_stepped_blocks_stay_in_their_residue():
    async def main():
        backend = AsyncMemoryBackend(step=3, start=2)
        async with AsyncSequence(backend, "orders", initial_block=4) as seq:
            ids = [await seq.next_id() for _ in range(20)]
            taken = await seq.take(7)
        return ids, taken

    ids, taken = run(main())
    assert all(i % 3 == 2 for i in [*ids, *taken])
    assert increasing([*ids, *taken])


def test_capacity_refusals_lengthen_the_runway_as_in_sequence():
    async def main():
        backend = AsyncMemoryBackend()
        seq = AsyncSequence(backend, "hot", initial_block=10, runway=1.0, max_runway=8.0)
        backend.fail_next(2, THROTTLED)
        await seq.next_id()
        await seq.take(15)  # a second block, throttled too
        runway = seq.sizer.current_runway
        await seq.aclose()
        return runway

    assert run(main()) == 4.0


def test_block_sizes_adapt_to_the_rate():
    async def main():
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "busy", initial_block=10, runway=5.0) as seq:
            for _ in range(2_000):
                await seq.next_id()
        return [len(block) for block in backend.blocks]

    sizes = run(main())
    assert sizes[0] == 10
    assert max(sizes) > 10  # grew with the rate, by at most 8x a block
    assert all(b <= a * 8 for a, b in itertools.pairwise(sizes))


# -- errors ------------------------------------------------------------------------


class FailingBackend:
    """Every request fails with ``error``, after a wait on the loop."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.calls = 0

    async def allocate(self, counter, count, *, idempotency_key):
        self.calls += 1
        await asyncio.sleep(0.01)
        raise self.error


def test_every_waiting_caller_gets_an_error_retrying_cannot_fix_as_its_own_instance():
    async def main():
        backend = FailingBackend(CounterNotFound(404, "counter_not_found", "no such counter"))
        seq = AsyncSequence(backend, "missing")
        results = await asyncio.gather(*(seq.next_id() for _ in range(10)), return_exceptions=True)
        await seq.aclose()
        return backend, results

    backend, results = run(main())
    assert all(isinstance(r, CounterNotFound) for r in results)
    assert len({id(r) for r in results}) == 10
    assert backend.calls == 1  # one request, heard by all


def test_transient_failures_are_retried_within_wait_timeout():
    async def main():
        backend = AsyncMemoryBackend()
        backend.fail_next(3, UNAVAILABLE)
        backend.fail_next(2, LOST_RESPONSE)
        async with AsyncSequence(backend, "flaky", block_size=10) as seq:
            ids = await asyncio.gather(*(seq.next_id() for _ in range(5)))
        return backend, ids, seq.unused_ids

    backend, ids, unused = run(main())
    assert sorted(ids) == [1, 2, 3, 4, 5]
    assert len(backend.blocks) == 1  # the lost answers were asked again with their key
    accounted(backend, ids, unused)


def test_a_service_that_stays_down_makes_callers_wait_not_the_loop():
    async def main():
        backend = FailingBackend(ServiceUnavailable("down"))
        seq = AsyncSequence(backend, "down", wait_timeout=0.3)
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        ticking = asyncio.create_task(ticker())
        results = await asyncio.gather(*(seq.next_id() for _ in range(20)), return_exceptions=True)
        stop.set()
        await ticking
        await seq.aclose(timeout=0)
        return results, ticks, backend.calls

    results, ticks, calls = run(main())
    assert all(isinstance(r, ServiceUnavailable) for r in results)
    assert calls > 1  # asked again while wait_timeout lasted
    # The ticker ran between the requests (each waited on the loop): a wait
    # that blocked the loop until wait_timeout would leave it at 0 or 1.
    assert ticks >= calls


def test_exhaustion_is_told_only_once_nothing_held_can_serve():
    """next_id() hears CounterExhausted only after every ID of the counter
    was handed out (or skipped by a take), whoever else is waiting; take(n)
    may hear it while fewer than n are held, which it could not be given."""

    async def main(seed):
        rng = random.Random(seed)
        backend = AsyncMemoryBackend(latency=0.002, max_id=157)
        seq = AsyncSequence(backend, "small", initial_block=10)
        events = []

        async def caller(task):
            got, taking = [], True
            while True:
                await asyncio.sleep(rng.random() * 0.002)
                if taking and rng.random() < 0.2:
                    try:
                        taken = await seq.take(rng.randint(1, 5))
                    except CounterExhausted:
                        taking = False
                        continue
                    got += taken
                    events.append(("ids", len(taken)))
                    continue
                try:
                    got.append(await seq.next_id())
                except CounterExhausted:
                    events.append(("exhausted", task))
                    return got
                events.append(("ids", 1))

        per_task = await asyncio.gather(*(caller(t) for t in range(30)))
        unused = await seq.aclose()
        return backend, per_task, events, unused

    for seed in range(5):
        backend, per_task, events, unused = run(main(seed))
        handed = [i for ids in per_task for i in ids]
        accounted(backend, handed, unused)
        assert all(increasing(ids) for ids in per_task)
        first_exhausted = next(i for i, e in enumerate(events) if e[0] == "exhausted")
        # unused: IDs take(n) skipped to stay in order; nothing else was left
        handed_before = sum(e[1] for e in events[:first_exhausted] if e[0] == "ids")
        assert handed_before + unused == 157
        assert sum(1 for e in events if e[0] == "exhausted") == 30


# -- cancellation ------------------------------------------------------------------


def test_a_caller_cancelled_while_its_request_is_on_the_network_loses_nothing():
    async def main():
        backend = AsyncMemoryBackend(latency=0.2)
        seq = AsyncSequence(backend, "orders", block_size=10)
        waiter = asyncio.create_task(seq.next_id())
        while backend.in_flight == 0:
            await asyncio.sleep(0.001)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        first = await seq.next_id()  # the request made for the cancelled caller brings it
        calls = backend.calls
        unused = await seq.aclose()
        return backend, first, calls, unused

    backend, first, calls, unused = run(main())
    assert first == 1
    assert calls == 1  # asked once, not again for the second caller
    assert backend.cancelled == 0  # the caller's cancellation never reached the request
    accounted(backend, [first], unused)


def test_asyncio_timeout_around_next_id_leaves_the_request_pending_for_the_next_caller():
    async def main():
        backend = AsyncMemoryBackend(latency=0.2)
        seq = AsyncSequence(backend, "orders", block_size=10)
        backend.fail_next(1, LOST_RESPONSE)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await seq.next_id()
        await settled(seq)  # the answer was lost: the request is still pending
        pending = seq._pending
        got = await seq.next_id()
        unused = await seq.aclose()
        return backend, pending, got, unused

    backend, pending, got, unused = run(main())
    assert pending is not None
    assert got == 1
    assert len(backend.blocks) == 1  # the retry carried the same key: one block
    accounted(backend, [got], unused)


async def random_draws(seq, rng, handed, per_task, task, rounds, fault):
    """A caller that takes IDs, cut short at random points."""
    mine = per_task.setdefault(task, [])
    for _ in range(rounds):
        if rng.random() < 0.05:
            fault()
        try:
            async with asyncio.timeout(rng.choice([None, 0, 0.0005, 0.002, 0.01])):
                if rng.random() < 0.3:
                    ids = list(await seq.take(rng.randint(1, 12)))
                else:
                    ids = [await seq.next_id()]
        except TimeoutError:
            continue
        handed.extend(ids)
        mine.extend(ids)
        await asyncio.sleep(0)


@pytest.mark.parametrize("kind", [LOST_RESPONSE, UNAVAILABLE])
def test_callers_cancelled_at_random_points_under_faults_lose_and_repeat_nothing(kind):
    async def main(seed):
        rng = random.Random(seed)
        backend = AsyncMemoryBackend(latency=0.003)
        seq = AsyncSequence(backend, "orders", initial_block=5, max_block=40, wait_timeout=ONE_REQUEST)
        handed, per_task = [], {}
        workers = [
            asyncio.create_task(
                random_draws(seq, rng, handed, per_task, t, 40, lambda: backend.fail_next(2, kind))
            )
            for t in range(20)
        ]
        for _ in range(30):  # and tasks cancelled outright, wherever they are
            await asyncio.sleep(rng.random() * 0.005)
            rng.choice(workers).cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        backend.clear_faults()  # aclose() asks again a few times only
        unused = await seq.aclose()
        return backend, handed, per_task, unused

    for seed in range(8):
        backend, handed, per_task, unused = run(main(seed))
        accounted(backend, handed, unused)
        assert all(increasing(ids) for ids in per_task.values())
        assert backend.cancelled == 0


def test_stress_200_tasks_mixing_next_id_and_take_with_cancellations_and_faults():
    async def main():
        rng = random.Random(23)
        backend = AsyncMemoryBackend(latency=0.002)
        seq = AsyncSequence(backend, "stress", initial_block=20, max_block=50, wait_timeout=ONE_REQUEST)
        handed, per_task = [], {}
        faults = [LOST_RESPONSE, UNAVAILABLE, THROTTLED]

        def fault():
            backend.fail_next(rng.randint(1, 3), rng.choice(faults))

        workers = [
            asyncio.create_task(random_draws(seq, rng, handed, per_task, t, 60, fault)) for t in range(200)
        ]
        for _ in range(100):
            await asyncio.sleep(rng.random() * 0.003)
            rng.choice(workers).cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        backend.clear_faults()  # aclose() asks again a few times only
        unused = await seq.aclose()
        return backend, handed, per_task, unused

    backend, handed, per_task, unused = run(main())
    assert len(handed) > 3_000
    assert backend.calls > 200  # many refills, each one a chance for a fault
    accounted(backend, handed, unused)  # 0 duplicates, 0 unaccounted
    assert all(increasing(ids) for ids in per_task.values())
    assert backend.cancelled == 0


def test_aclose_asks_again_for_a_request_whose_answer_was_lost():
    async def main():
        backend = AsyncMemoryBackend(latency=0.01)
        seq = AsyncSequence(backend, "orders", block_size=10, prefetch_at=0.5)
        for _ in range(6):
            await seq.next_id()  # past the mark: the next block is asked for
        backend.fail_next(1, LOST_RESPONSE)
        await settled(seq)
        unused = await seq.aclose()
        return backend, unused

    backend, unused = run(main())
    assert len(backend.blocks) == 2
    assert unused == 4 + 10  # the lost block was found again and counted


def test_an_unclosed_sequence_warns_with_its_unused_count():
    async def main():
        seq = AsyncSequence(AsyncMemoryBackend(), "orders", block_size=10, prefetch=False)
        await seq.next_id()
        return seq

    seq = run(main())
    with pytest.warns(ResourceWarning, match="9 IDs went unused"):
        seq.__del__()


# -- failover ----------------------------------------------------------------------------


def test_failover_moves_to_the_next_region_and_stays_there():
    async def main():
        east = AsyncMemoryBackend(step=2, start=1)
        west = AsyncMemoryBackend(step=2, start=2)
        backend = AsyncFailoverBackend([east, west])
        east.fail_next(50, UNAVAILABLE)
        async with AsyncSequence(backend, "orders", block_size=5) as seq:
            ids = [await seq.next_id() for _ in range(12)]
        return backend, east, west, ids, seq.unused_ids

    backend, east, west, ids, unused = run(main())
    assert all(i % 2 == 0 for i in ids)  # west's residue
    assert increasing(ids)
    assert backend.failovers == 1
    assert east.calls == 1  # later requests started where the first succeeded
    assert west.handed_out == len(ids) + unused


class GatedBackend:
    """AsyncMemoryBackend whose requests each wait for the test to let them through."""

    def __init__(self) -> None:
        self.memory = AsyncMemoryBackend()
        self.gate = asyncio.Semaphore(0)
        self.waiting = 0

    async def allocate(self, counter, count, *, idempotency_key):
        self.waiting += 1
        await self.gate.acquire()
        self.waiting -= 1
        return await self.memory.allocate(counter, count, idempotency_key=idempotency_key)


class CountingDeque(collections.deque):
    appended = 0

    def append(self, item):
        CountingDeque.appended += 1
        super().append(item)


def test_a_block_wakes_only_as_many_waiters_as_it_has_ids_for():
    """A thousand tasks waiting on one request were all woken by its block,
    900 of them to find nothing and wait again: tens of milliseconds of
    loop time at every block."""

    async def main():
        backend = GatedBackend()
        seq = AsyncSequence(backend, "herd", block_size=10, prefetch=False)
        seq._waiters = CountingDeque()
        callers = [asyncio.create_task(seq.next_id()) for _ in range(100)]
        while backend.waiting == 0:
            await asyncio.sleep(0)
        waits_before = CountingDeque.appended
        backend.gate.release()  # the first block: 10 IDs
        while backend.waiting == 0:  # the next request goes out for the 90 still waiting
            await asyncio.sleep(0)
        for _ in range(10):
            await asyncio.sleep(0)  # the woken callers run
        served = sum(task.done() for task in callers)
        waits_after = CountingDeque.appended
        for _ in range(9):
            backend.gate.release()
        ids = await asyncio.gather(*callers)
        await seq.aclose()
        return waits_before, waits_after, served, ids

    waits_before, waits_after, served, ids = run(main())
    assert waits_before == 100
    assert served == 10
    assert waits_after == waits_before  # nobody was woken for nothing
    assert sorted(ids) == list(range(1, 101))


def test_a_request_cancelled_under_its_waiters_is_asked_again_with_its_key():
    """The request task is cancelled only when its loop goes away; its
    waiters must not be left waiting for an answer that never comes."""

    async def main():
        backend = AsyncMemoryBackend(latency=0.2)
        seq = AsyncSequence(backend, "orders", block_size=10)
        waiter = asyncio.create_task(seq.next_id())
        while backend.in_flight == 0:
            await asyncio.sleep(0.001)
        key = seq._pending.key
        seq._request_task.cancel()
        got = await asyncio.wait_for(waiter, ONE_REQUEST)
        unused = await seq.aclose()
        return backend, key, got, unused

    backend, key, got, unused = run(main())
    assert got == 1
    assert backend.memory._by_key.keys() == {key}  # the same request, asked again
    accounted(backend, [got], unused)


def test_a_large_take_behind_a_prefetch_asks_for_one_block_of_its_size():
    """Reproduces: with block_size=10, take(1000) behind a prefetch sent 103
    requests and took 2,020 IDs: after each small block, the next request
    was for 10 again (the Sequence sent 2 and took 1,010). On a counter
    shared with other clients those chunks never join up."""

    async def main():
        backend = AsyncMemoryBackend()
        async with AsyncSequence(backend, "orders", block_size=10, prefetch_at=0.5) as seq:
            assert [await seq.next_id() for _ in range(6)] == list(range(1, 7))  # the prefetch is out
            taken = await seq.take(1000)
        return backend, taken

    backend, taken = run(main())
    assert len(taken) == 1000
    # The first block, the prefetch, the take's own block, and the prefetch after it.
    assert [len(block) for block in backend.blocks] == [10, 10, 1000, 10]


class OneGatePerRequest(AsyncMemoryBackend):
    """Request i (from 0) waits for gates[i], except the first, answered at once."""

    def __init__(self, **options):
        super().__init__(**options)
        self.gates = collections.defaultdict(asyncio.Event)

    async def allocate(self, counter, count, *, idempotency_key):
        index = self.memory.calls
        if index:
            await self.gates[index].wait()
        return await super().allocate(counter, count, idempotency_key=idempotency_key)


def test_a_caller_behind_a_take_the_block_cannot_serve_is_served_from_it():
    """Found by the model of tests/proof/test_model_sequences.py. Reproduces:
    a take(3) waited first and a next_id() behind it; a block of 2 landed;
    the take was woken (it could not be served, and waited again) and the
    next_id was not: it waited for the take's block with 2 IDs held."""

    async def main():
        backend = OneGatePerRequest()
        seq = AsyncSequence(backend, "orders", block_size=2, prefetch_at=0.5)
        assert [await seq.next_id(), await seq.next_id()] == [1, 2]  # the prefetch of 3..4 is out
        take = asyncio.create_task(seq.take(3))
        one = asyncio.create_task(seq.next_id())
        await asyncio.sleep(0)
        backend.gates[1].set()  # 3..4 lands; the take's own request stays out
        for _ in range(10):
            await asyncio.sleep(0)
        served = one.result() if one.done() else None
        backend.gates[2].set()
        taken = await take
        await seq.aclose(timeout=0)
        return served, taken

    served, taken = run(main())
    assert served == 3
    assert taken[0] > 3
