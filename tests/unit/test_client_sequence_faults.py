"""Sequence under faults and at scale: waiters told of errors, retries that
keep their request, order per thread, take() with many blocks, nothing
leaked. Each test names the failure it reproduces."""

from __future__ import annotations

import gc
import threading
import time
import uuid
import warnings
import weakref

import pytest

from idblocks import CounterExhausted, CounterNotFound, Sequence, SequenceClosed, ServiceUnavailable
from idblocks.testing import LOST_RESPONSE, MemoryBackend
from tests.support.waiting import wait_until

# How long a thread that should not be blocked is given to finish: far
# longer than anything it does takes, even on a loaded machine (a passing
# test does not wait it out), and shorter than the 60 s a Gate holds a
# request: a thread still running after it waits for the gate.
ONE_REQUEST = 30.0


def at_once(threads, work):
    """Run ``work()`` on ``threads`` threads started together; each slot holds
    (what it returned or raised, seconds it took)."""
    results = [None] * threads
    start = threading.Barrier(threads)

    def run(slot):
        start.wait()
        began = time.monotonic()
        try:
            outcome = work()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome = exc
        results[slot] = (outcome, time.monotonic() - began)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    return results


class Gate(MemoryBackend):
    """allocate() calls after the first ``free`` wait until the gate opens."""

    def __init__(self, free=1, **kwargs):
        super().__init__(**kwargs)
        self.free = free
        self.gate = threading.Event()
        self.held = threading.Event()

    def allocate(self, counter, count, *, idempotency_key):
        if self.calls >= self.free:
            self.held.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return super().allocate(counter, count, idempotency_key=idempotency_key)


class LoseEvery(MemoryBackend):
    """Every ``every``-th call takes its block and loses the answer."""

    def __init__(self, every, **kwargs):
        super().__init__(**kwargs)
        self.every = every

    def allocate(self, counter, count, *, idempotency_key):
        if (self.calls + 1) % self.every == 0:
            self.fail_next(1, LOST_RESPONSE)
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def flatten(got):
    return [i for item in got for i in (item if isinstance(item, range) else [item])]


# -- every waiter is told ----------------------------------------------------------


class NoSuchCounter(MemoryBackend):
    def allocate(self, counter, count, *, idempotency_key):
        self._sleep(0.05)
        raise CounterNotFound(404, "counter_not_found", f"no counter '{counter}'")


class CountedWaits(threading.Condition):
    """The Sequence's condition, counting the waits that ended because their
    time was up rather than because a thread notified them."""

    def __init__(self, lock):
        super().__init__(lock)
        self.timed_out = 0

    def wait(self, timeout=None):
        notified = super().wait(timeout)
        self.timed_out += not notified
        return notified


@pytest.mark.parametrize(
    ("backend", "error"),
    [
        (NoSuchCounter(), CounterNotFound),
        (MemoryBackend(max_id=0, latency=0.05), CounterExhausted),
    ],
    ids=["not-found", "exhausted"],
)
def test_every_waiting_thread_gets_an_error_retrying_cannot_fix(backend, error):
    """Reproduces: four threads waiting for a block of a counter that does not
    exist (or is exhausted): one got the error after 0.05 s, three got
    ServiceUnavailable after the whole wait_timeout. Each waiter is woken by
    the answer, not by its own deadline: a wait that ran out its time means
    nobody told it (the deadline is 30 s; the answer comes in 0.05)."""
    seq = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    seq._signal.changed = seq._changed = waits = CountedWaits(seq._lock)  # white-box
    results = at_once(4, seq.next_id)
    assert [type(outcome) for outcome, _ in results] == [error] * 4
    assert waits.timed_out == 0
    seq.close()


def test_a_transient_failure_is_retried_by_the_threads_that_wait():
    """Reproduces: the failed request's ServiceUnavailable went to one waiter
    and the others waited out wait_timeout with nobody asking again."""
    backend = MemoryBackend(latency=0.05)
    backend.fail_next(1)
    seq = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    results = at_once(4, seq.next_id)
    failed = [outcome for outcome, _ in results if isinstance(outcome, Exception)]
    got = [outcome for outcome, _ in results if isinstance(outcome, int)]
    # Only the thread whose own request failed; a waiter left waiting for
    # nobody would fail too, after wait_timeout.
    assert len(failed) <= 1
    assert all(isinstance(error, ServiceUnavailable) for error in failed)
    assert len(got) == len(set(got)) >= 3
    seq.close()


class SleepThroughTheAnswers(threading.Condition):
    """The Sequence's condition, except that one thread (``sleeper``), once
    it waits, is not let run again until the request after the next block
    has failed: as a scheduler may leave a woken thread waiting for the
    lock while others land a block, start it and see the next request
    refused."""

    def __init__(self, seq):
        super().__init__(seq._lock)
        self.seq = seq
        self.sleeper = None

    def wait(self, timeout=None):
        if threading.current_thread() is not self.sleeper:
            return super().wait(timeout)
        seq = self.seq
        deadline = time.monotonic() + 60
        while seq._failure is None or seq._fetching:  # white-box
            assert super().wait(max(0.0, deadline - time.monotonic())), "the next request never failed"
        return True


@pytest.mark.parametrize("failure", ["exhausted", "unavailable"])
def test_a_thread_that_slept_through_a_block_and_a_refusal_is_served_from_the_block(failure):
    """Reproduces: a thread waiting for a block slept while the block came,
    another thread started it and the request after it was refused; it woke
    to "the last answer failed" and raised CounterExhausted (or, after a
    request of its own, ServiceUnavailable) with 8 IDs of the block held.
    Given that order of events, pinned, the sleeper gets the block's next
    ID, and the failure is told only once the block is spent."""
    # 10 IDs a block, served 1 + 9: the next request goes out after one.
    backend = Gate(free=1, max_id=20 if failure == "exhausted" else 2**53 - 1)
    error = CounterExhausted if failure == "exhausted" else ServiceUnavailable
    with Sequence(backend, "orders", block_size=10, prefetch_at=0.9, wait_timeout=60) as seq:
        seq._signal.changed = seq._changed = sleepy = SleepThroughTheAnswers(seq)  # white-box
        assert [seq.next_id() for _ in range(10)] == list(range(1, 11))
        assert backend.held.wait(10)  # the next block is on its way, held
        got = []
        sleeper = threading.Thread(target=lambda: got.append(_outcome(seq.next_id)))
        sleepy.sleeper = sleeper
        sleeper.start()
        assert wait_until(lambda: len(sleepy._waiters) == 1)  # the sleeper waits for the block
        backend.gate.set()
        assert wait_until(lambda: seq._ready)  # 11..20 landed
        if failure == "unavailable":
            backend.fail_next(10_000)  # down from the next request on
        assert seq.next_id() == 11  # this thread starts the block
        assert seq.next_id() == 12  # and passes the mark: the next request fails
        sleeper.join(timeout=60)
        assert got == [13]
        assert [seq.next_id() for _ in range(7)] == list(range(14, 21))
        with pytest.raises(error):
            seq.next_id()


def _outcome(call):
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the test looks at it
        return exc


# -- a retry never changes the request -------------------------------------------------


def draw_through_faults(seq, count, *, take_every=0, take_size=0):
    """``count`` draws, retrying what a lost response fails."""
    got, failures = [], 0
    while len(got) < count:
        assert failures < 10 * count
        try:
            if take_every and len(got) % take_every == take_every - 1:
                got.append(seq.take(take_size))
            else:
                got.append(seq.next_id())
        except ServiceUnavailable:
            failures += 1
    return got, failures


@pytest.mark.parametrize("prefetch", [True, False])
def test_lost_responses_lose_no_ids_while_block_sizes_adapt(prefetch):
    """Reproduces: a retry after a lost response asked for the new size the
    sizer had just measured, with a new key, and the lost block was burnt
    (100, 800 and 1,190 IDs lost in three small runs)."""
    backend = LoseEvery(3)
    seq = Sequence(backend, "orders", initial_block=10, max_block=2000, prefetch=prefetch)
    got, failures = draw_through_faults(seq, 20_000, take_every=7, take_size=30)
    unused = seq.close()
    ids = flatten(got)
    assert failures > 0
    assert backend.handed_out == len(ids) + unused
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)


def test_a_lost_response_is_retried_with_its_count_without_prefetch():
    """Reproduces: without prefetch every retry called next_size() again,
    which grew 8x per call (800, 6400, 51200 ...), so each retry took a new,
    bigger block."""
    clock = [0.0]
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", prefetch=False, initial_block=100, clock=lambda: clock[0])
    drawn = []
    for _ in range(100):  # 100k IDs/s on the sequence's clock: the next block grows
        drawn.append(seq.next_id())
        clock[0] += 1e-5
    backend.fail_next(3, LOST_RESPONSE)
    for _ in range(3):
        with pytest.raises(ServiceUnavailable):
            seq.next_id()
    drawn.append(seq.next_id())
    assert len(backend.blocks) == 2
    unused = seq.close()  # first: it counts a block still on its way
    assert backend.handed_out == len(drawn) + unused


def test_a_lost_response_to_take_is_retried_with_its_key():
    """Reproduces: take() fetched without keeping the key, so a retried take
    after a lost response took a second block."""
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    assert seq.next_id() == 1
    backend.fail_next(2, LOST_RESPONSE)
    for _ in range(2):
        with pytest.raises(ServiceUnavailable):
            seq.take(500)
    taken = seq.take(500)
    assert len(backend.blocks) == 2
    assert taken == range(2, 502)
    unused = seq.close()  # first: it counts a block still on its way
    assert backend.handed_out == 1 + 500 + unused


# -- increasing per thread --------------------------------------------------------------


def test_next_id_after_take_never_goes_back():
    """Reproduces: after take(), next_id() on the same thread went 196..200,
    then 61, 62, 63: the leftovers of an older block came after the range."""
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", block_size=100)
    got = [seq.next_id() for _ in range(60)]
    backend.allocate("orders", 5, idempotency_key="another client")
    got.append(seq.take(150))
    got += [seq.next_id() for _ in range(200)]
    ids = flatten(got)
    assert ids == sorted(ids)
    unused = seq.close()  # first: it counts a block still on its way
    assert backend.handed_out == len(ids) + 5 + unused


def test_ids_increase_on_each_of_many_threads_mixing_next_id_and_take():
    backend = MemoryBackend(latency=0.0002)
    seq = Sequence(backend, "orders", initial_block=16, max_block=256)

    def work():
        got = []
        for i in range(600):
            got.append(seq.take(1 + i % 40) if i % 5 == 0 else seq.next_id())
        return flatten(got)

    results = at_once(8, work)
    per_thread = [outcome for outcome, _ in results]
    assert all(isinstance(ids, list) and ids == sorted(ids) for ids in per_thread)
    every = [i for ids in per_thread for i in ids]
    assert len(every) == len(set(every))
    unused = seq.close()  # first: it counts a block still on its way
    assert backend.handed_out == len(every) + unused


# -- take at scale -----------------------------------------------------------------------


def test_many_takes_make_few_requests_and_hold_few_blocks():
    """Reproduces: 3,000 x take(60) with default settings made 3,000 block
    requests, left 120,000 IDs unused in 3,000 buffered blocks, and each
    take() scanned them all; the sizer never saw take() use."""
    backend = MemoryBackend()
    seq = Sequence(backend, "orders")
    taken, most_buffered = [], 0
    for _ in range(3000):
        taken.append(seq.take(60))
        most_buffered = max(most_buffered, len(seq._ready))  # white-box: blocks held
    assert backend.calls <= 20
    assert most_buffered <= 2
    assert seq.sizer.rate is not None  # take() use was measured
    ids = flatten(taken)
    assert len(ids) == len(set(ids)) == 180_000
    assert seq._skipped < 60 * backend.calls  # white-box: under one take per block
    unused = seq.close()  # first: it counts a block still on its way
    assert backend.handed_out == len(ids) + unused


def test_next_id_and_close_go_on_while_a_take_waits_for_the_network():
    """Reproduces: take() held the Sequence's lock during its request, so a
    next_id() at a block boundary waited for it though a fetched block sat in
    memory, and close() waited too. Also: a block that lands after close()
    is counted in unused_ids."""
    backend = Gate(free=2)
    seq = Sequence(backend, "orders", block_size=100, wait_timeout=60)
    drawn = [seq.next_id() for _ in range(60)]  # past the mark: block 2 is fetched
    assert wait_until(lambda: len(seq._ready) == 1)  # white-box: it is in memory
    taken = []

    def take():
        try:
            taken.append(seq.take(500))
        except SequenceClosed as exc:
            taken.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    assert backend.held.wait(10)  # take's request is on the network
    drawer = threading.Thread(target=lambda: drawn.extend(seq.next_id() for _ in range(140)))
    drawer.start()
    drawer.join(timeout=ONE_REQUEST)
    closed = []
    closer = threading.Thread(target=lambda: closed.append(seq.close(timeout=0.2)))
    if not drawer.is_alive():
        closer.start()
        closer.join(timeout=ONE_REQUEST)
    blocked = drawer.is_alive(), closer.is_alive()
    backend.gate.set()
    drawer.join(timeout=10)
    closer.join(timeout=10)
    taker.join(timeout=10)
    assert blocked == (False, False)
    assert len(closed) == 1
    assert drawn == list(range(1, 201))
    assert len(taken) == 1
    assert isinstance(taken[0], SequenceClosed)
    assert wait_until(lambda: seq.unused_ids == backend.handed_out - 200)


def test_take_up_to_the_services_max_batch_works():
    """Reproduces: take(900) against a MaxBatchSize of 1,000 failed with
    invalid_count once the sizer wanted more than 1,000: it asked for
    max(n, next_size())."""
    clock = [0.0]
    backend = MemoryBackend(max_batch=1000)
    seq = Sequence(backend, "orders", prefetch=False, clock=lambda: clock[0])
    for _ in range(300):  # a high rate: the next block would be thousands
        seq.next_id()
        clock[0] += 1e-6
    taken = seq.take(900)
    assert len(taken) == 900
    assert seq.next_id() > taken[-1]
    seq.close()


def test_take_beyond_max_batch_is_refused_before_any_request():
    backend = MemoryBackend()
    with Sequence(backend, "orders", max_batch=1000) as seq:
        with pytest.raises(ValueError, match="max_batch"):
            seq.take(1001)
        assert backend.calls == 0
        assert len(seq.take(1000)) == 1000


# -- nothing leaks ---------------------------------------------------------------------------


def test_a_dropped_sequence_stops_its_prefetcher_and_is_collected():
    """Reproduces: 200 Sequences dropped without close() kept 200 prefetcher
    threads and 19,800 IDs, never reported: the thread held the Sequence."""
    backend = MemoryBackend()
    # A name no other test uses, so that the warning looked for is this
    # test's own; and what other tests left is collected before recording.
    name = f"dropped-{uuid.uuid4().hex}"
    gc.collect()
    seq = Sequence(backend, name, block_size=100)
    drawn = [seq.next_id() for _ in range(60)]  # the prefetcher runs
    ready, waiters = seq._ready, seq._changed._waiters  # white-box
    # The next block is in, and the prefetcher waits for more (holding only
    # a weak reference while it waits).
    assert wait_until(lambda: len(ready) == 1 and len(waiters) == 1)
    thread = seq._prefetcher
    assert thread is not None
    assert thread.is_alive()
    dropped = weakref.ref(seq)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del seq
        gc.collect()
    assert dropped() is None
    thread.join(timeout=10)
    assert not thread.is_alive()
    # Only the Sequence's own warning: the collection may also finalise what
    # other tests left behind (an unclosed pipe, say), which is not this one's.
    told = [
        str(w.message)
        for w in caught
        if issubclass(w.category, ResourceWarning) and str(w.message).startswith(f"Sequence('{name}')")
    ]
    assert told == [f"Sequence('{name}') was never closed; 140 IDs went unused"]
    assert len(drawn) == 60


def test_close_does_not_wait_long_for_a_prefetch_and_counts_its_block():
    """Reproduces: close() while a refill was in flight waited for it (up to
    wait_timeout), and the late block was neither used nor counted."""
    backend = Gate(free=1)
    seq = Sequence(backend, "orders", block_size=100, wait_timeout=60)
    drawn = [seq.next_id() for _ in range(60)]
    assert backend.held.wait(10)
    closed = []
    closer = threading.Thread(target=lambda: closed.append(seq.close(timeout=0.2)))
    closer.start()
    closer.join(timeout=ONE_REQUEST)
    blocked = closer.is_alive()
    backend.gate.set()
    closer.join(timeout=10)
    assert not blocked
    assert closed == [40]  # returned without the block on its way
    # 40 left of the first block, and the second, counted when it lands
    assert wait_until(lambda: seq.unused_ids == 140)
    assert backend.handed_out == len(drawn) + seq.unused_ids
