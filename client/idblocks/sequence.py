"""Sequence: IDs of one counter, handed out from memory.

The IDs come in blocks (POST /counters/{name}/batch) and are served by a
plain iterator over the current block. Where the interpreter has a GIL,
``next()`` on a range iterator is one C call that advances the iterator before
anything can switch threads, so ``next_id`` needs no lock: two threads never
get the same ID. Builds without a GIL (free-threaded) take a lock instead.

Each block is served in two segments. When the first runs out, the next block
is requested in the background (prefetch), so in steady state the network is
never waited on. When the second runs out, the already-fetched block takes
over. Only these boundaries take the lock, and no lock is held while a
request is on the network.

Blocks are requested one at a time, and a block request, once made, is
repeated with the same count and Idempotency-Key until the service answers
it; so a lost response costs no IDs, and every block is above the one before.
IDs are handed out in block order, which is why they increase on each thread.

Block sizes adapt: each is sized to last ``runway`` seconds at the measured
rate, within [min_block, max_block]; a busy client makes few requests, an
idle one holds few unused IDs. A block request the service refused for
capacity (the counter is hot) lengthens the runway, up to ``max_runway``.

A process forked from one holding a Sequence starts it afresh: it drops the
blocks, the request and the prefetcher it inherited (the parent still owns
them) and fetches its own blocks, with keys drawn in the child.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import math
import os
import sys
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType

from idblocks.backend import Backend, Block
from idblocks.errors import (
    CounterExhausted,
    InvalidRequest,
    SequenceClosed,
    ServiceError,
    ServiceUnavailable,
)

_EXHAUSTED: Iterator[int] = iter(())
_EMPTY = range(0)


def _after(ids: range) -> int:
    """The ID a block continuing ``ids`` would start with (its step apart)."""
    return ids.start + len(ids) * ids.step


def _joined(first: range, then: range) -> range:
    """``first`` and ``then``, which continues it, as one range."""
    return range(first.start, _after(then), first.step)


# The service's default MaxBatchSize.
DEFAULT_MAX_BATCH = 1_000_000

# The longest a block is sized to last, by default, however hot the counter:
# blocks of a few minutes let a fleet of 10^4 busy clients share one counter's
# ~1,000 writes/s (clients / runway writes/s) with room to spare, and a client
# stopping leaves at most that long's worth of IDs unused.
MAX_RUNWAY = 300.0

# How long close() waits, by default, for a block request on the network to be
# answered, so that the block it brings is counted: HttpBackend's default
# timeout for one request.
CLOSE_TIMEOUT = 10.0


# How many times close() asks for a request whose answer was lost (the
# backend retries within each), while its timeout lasts.
CLOSE_ATTEMPTS = 3

# The longest fork() waits for block requests on the network to finish.
FORK_WAIT = CLOSE_TIMEOUT


def prefetch_tail(size: int, prefetch_at: float, rate: float | None, latency: float | None) -> int:
    """How many IDs of a block of ``size`` are still unused when the next
    block is requested: the ``prefetch_at`` share, or, when a request takes
    longer than that share lasts, two requests' worth at ``rate`` IDs/s (the
    block sizer's estimate) and ``latency`` seconds (smoothed_latency's);
    never more than the block. Pure, so that a simulation of many clients
    decides as a Sequence does."""
    tail = math.ceil(size * prefetch_at)
    if rate and latency:
        tail = max(tail, math.ceil(rate * latency * 2))
    return min(tail, size)


def smoothed_latency(previous: float | None, seconds: float) -> float:
    """The moving average of block request latency a Sequence keeps, after a
    request that took ``seconds`` (retries included)."""
    return seconds if previous is None else 0.5 * previous + 0.5 * seconds


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


class BlockSizer:
    """How many IDs to ask for next: enough for ``runway`` seconds at the
    consumption rate seen so far (a moving average), growing at most
    ``max_growth`` times per block so one burst does not over-reserve.

    The runway lengthens when the counter is hot: every capacity refusal a
    block request met (``contended``) doubles it, up to ``max_runway``
    (``runway`` itself when None). A fleet of clients costs the counter
    about clients / runway writes a second, so a fleet too big for the
    counter's ~1,000 writes/s needs longer runways, and each client learns
    it from the refusals it meets. The runway never shortens again: a fleet
    that was too big a minute ago still is, and growing back towards the
    short runway would bring the refusals back (bench/scale.py). What it
    costs is bigger blocks, and more IDs unused when the client stops."""

    def __init__(
        self,
        initial: int,
        minimum: int,
        maximum: int,
        runway: float,
        max_growth: float = 8.0,
        max_runway: float | None = None,
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError("block sizes must satisfy 1 <= min_block <= initial_block <= max_block")
        if not runway > 0:
            raise ValueError("runway must be positive")
        if max_runway is None:
            max_runway = runway
        elif not max_runway >= runway:
            raise ValueError(f"max_runway ({max_runway!r}) must be at least runway ({runway!r})")
        self.minimum, self.maximum, self.runway, self.max_growth = minimum, maximum, runway, max_growth
        self.max_runway = max_runway
        self.current_runway = runway  # runway, lengthened by capacity refusals
        self.last = initial
        self.rate: float | None = None  # IDs per second
        self._since: float | None = None  # where the interval the next observation covers begins

    def demand_from(self, now: float) -> None:
        """IDs are wanted from ``now`` on (a block is asked for); the first
        interval measured starts here, not when that block arrives."""
        if self._since is None:
            self._since = now

    def block_finished(self, consumed: int, now: float) -> None:
        """A block of ``consumed`` IDs ran out at ``now``. Its interval runs
        from where the previous block ran out, not from when this one
        arrived: demand that waited for it in between was drained from it at
        once, and a block emptied at once by waiting callers measures the
        rate they arrived at, not the speed of memory. (Measured from its
        arrival, one such block read as 10^8 IDs/s and sent the sizes to
        max_block for a dozen blocks.)"""
        since = now if self._since is None else self._since
        self.observe(consumed, now - since)
        self._since = now

    def observe(self, consumed: int, seconds: float) -> None:
        """A block of ``consumed`` IDs lasted ``seconds``."""
        if consumed <= 0:
            return
        sample = consumed / max(seconds, 1e-6)
        self.rate = sample if self.rate is None else 0.5 * self.rate + 0.5 * sample

    def contended(self, refusals: int) -> None:
        """The last block request was refused ``refusals`` times for
        capacity (answered in the end or not): double the runway for each,
        up to max_runway. Each refusal counts, not each request: a request
        refused again and again meets a counter far over its budget."""
        if refusals > 0:
            # Bounded exponent: past 2**64 every runway is at max_runway anyway.
            self.current_runway = min(self.max_runway, self.current_runway * 2.0 ** min(refusals, 64))

    def next_size(self) -> int:
        if self.rate is not None:
            wanted = self.rate * self.current_runway
            wanted = min(wanted, self.last * self.max_growth)
            self.last = int(min(self.maximum, max(self.minimum, wanted)))
        return self.last

    def cap(self, maximum: int) -> None:
        self.maximum = max(self.minimum, min(self.maximum, maximum))
        self.last = min(self.last, self.maximum)


@dataclass(frozen=True)
class _Request:
    """A block request: fixed when first made, repeated as is until answered."""

    key: str
    size: int


@dataclass(frozen=True)
class _Failure:
    """How the last answered request failed, for the threads that waited on it."""

    error: BaseException
    size: int  # the count that was refused

    def final_for(self, need: int) -> bool:
        """Whether a thread needing ``need`` IDs can hope for nothing better.
        Refusals of a size (too large, or more than the counter has left)
        still let a smaller request through; no answer at all is retried."""
        if isinstance(self.error, ServiceUnavailable) or not isinstance(self.error, Exception):
            return False
        return not _size_refusal(self.error) or need >= self.size


def _size_refusal(error: BaseException) -> bool:
    return isinstance(error, CounterExhausted) or (
        isinstance(error, InvalidRequest) and error.code == "invalid_count"
    )


def _fresh(error: BaseException) -> BaseException:
    """A new instance of a shared error, so that threads raising it at once do
    not write their tracebacks into one object."""
    if isinstance(error, ServiceError):
        return type(error)(error.status, error.code, error.message)
    if isinstance(error, ServiceUnavailable):
        return ServiceUnavailable(*error.args, capacity_refusals=error.capacity_refusals)
    return error


class _Signal:
    """What the prefetcher thread shares with its Sequence. The thread holds
    this and a weak reference to the Sequence, never the Sequence itself, so
    a Sequence nobody uses any more is collected and its thread ends."""

    def __init__(self) -> None:
        # Reentrant: a Sequence collected on a thread that holds its lock
        # (the cyclic collector runs anywhere) closes itself under that lock.
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.want = False  # a block should be fetched ahead
        self.stop = False


def _prefetch_loop(sequence: weakref.ReferenceType[Sequence], signal: _Signal) -> None:
    while True:
        with signal.changed:
            while not (signal.want or signal.stop):
                signal.changed.wait()
            if signal.stop:
                return
            signal.want = False
        seq = sequence()
        if seq is None:
            return
        seq._prefetch_once()
        del seq  # dropped outside the lock: collecting it takes the lock


class Sequence:
    def __init__(
        self,
        backend: Backend,
        counter: str,
        *,
        prefetch: bool = True,
        block_size: int | None = None,
        initial_block: int = 100,
        min_block: int = 1,
        max_block: int = 1_000_000,
        runway: float = 5.0,
        max_runway: float | None = None,
        prefetch_at: float = 0.5,
        wait_timeout: float = 60.0,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``block_size`` fixes every block's size (no adapting), except that
        ``take(n)`` asks for at least ``n``. ``prefetch_at`` is the share of
        a block still unused when the next one is requested; it grows by
        itself when requests take longer than that share lasts.
        ``wait_timeout`` bounds how long a call waits for a block another
        thread is fetching; a call's own request is bounded by the backend's
        retry policy. ``max_batch`` is the service's MaxBatchSize: the
        largest ``take(n)``. ``runway`` is how many seconds a block should
        last; each capacity refusal a block request meets (the counter is
        hot) doubles it, up to ``max_runway`` (by default MAX_RUNWAY, or
        ``runway`` if that is longer)."""
        if block_size is not None:
            initial_block = min_block = max_block = block_size
        if not 0 <= prefetch_at <= 1:
            raise ValueError("prefetch_at must be between 0 and 1")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, not {max_batch!r}")
        self.backend = backend
        self.counter = counter
        self.prefetch = prefetch
        self.prefetch_at = prefetch_at
        self.wait_timeout = wait_timeout
        self.max_batch = max_batch
        self.clock = clock
        if max_runway is None:
            max_runway = max(MAX_RUNWAY, runway)
        self.sizer = BlockSizer(initial_block, min_block, max_block, runway, max_runway=max_runway)
        self._ceiling = max_batch  # lowered when the service refuses a size as too large
        self._room: int | None = None  # at most what the counter seems to have left
        self._take_hint = 0  # the last take(n): blocks are asked for at least that
        self._latency: float | None = None
        self._closed = False
        self.unused_ids: int | None = None  # set by close()
        self._reset()
        if not gil_enabled():
            self.next_id = self._next_id_locked  # type: ignore[method-assign]
        with _live_lock:
            _live.add(self)

    def _reset(self) -> None:
        """Hold nothing: at the start, and in a forked child."""
        self._signal = _Signal()
        self._lock = self._signal.lock
        self._changed = self._signal.changed
        self._prefetcher: threading.Thread | None = None
        self._ids: Iterator[int] = _EXHAUSTED  # what next_id draws from
        self._position: Iterator[int] = _EXHAUSTED  # a range iterator whose length_hint is what is left
        self._segment = _EMPTY  # the segment being drawn from
        self._rest: range | None = None  # the current block's later segment
        self._block: range | None = None  # the current block, for sizing
        self._ready: collections.deque[range] = collections.deque()  # fetched, not started
        self._pending: _Request | None = None  # made, not answered yet
        self._fetching = False  # a thread has the pending request on the network
        self._answers = 0  # requests answered or failed so far
        self._failure: _Failure | None = None  # how the last of them failed, if it did
        self._skipped = 0  # IDs passed over by take(), never handed out
        self.requests = 0  # block requests that succeeded

    # -- handing out ---------------------------------------------------------

    def next_id(self) -> int:
        """The next ID. Thread-safe; waits on the network only when every
        fetched ID is used up."""
        try:
            return next(self._ids)
        except StopIteration:
            return self._next_id_slow()

    def _next_id_locked(self) -> int:
        with self._lock:
            try:
                return next(self._ids)
            except StopIteration:
                pass
        return self._next_id_slow()

    def _next_id_slow(self) -> int:
        with self._lock:
            deadline = time.monotonic() + self.wait_timeout
            while True:
                try:
                    return next(self._ids)  # another thread moved on already
                except StopIteration:
                    self._advance(deadline)

    def take(self, n: int) -> range:
        """``n`` consecutive IDs, as a range, above every ID this thread had
        before. They come from what is held when it covers ``n``; else from a
        block of at least ``n`` (fetched if need be, while other threads go on
        drawing what is held), and the IDs still held below it are then
        skipped, counted in ``unused_ids``: handing them out afterwards would
        go backwards. ``n`` up to ``max_batch``; more raises ValueError before
        anything is asked of the service."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        if n > self.max_batch:
            raise ValueError(f"n must be at most max_batch ({self.max_batch}), not {n}")
        with self._lock:
            self._take_hint = n
            deadline = time.monotonic() + self.wait_timeout
            while True:
                self._check_open()
                # From here no other thread can draw: next_id finds an empty
                # iterator and waits for the lock.
                self._ids = _EXHAUSTED
                current = self._left_in_segment()
                held, joined = self._held_run(current, n)
                if len(held) >= n:
                    for _ in range(joined):
                        # The block before is used up as far as sizing goes.
                        self._finish_block()
                        self._block = self._ready.popleft()
                        self._rest = None
                    return self._carve(held, n)
                self._activate(current)  # not enough: the others draw on meanwhile
                big = next((i for i, block in enumerate(self._ready) if len(block) >= n), None)
                if big is None:
                    self._await_block(n, deadline)
                    continue  # the lock was let go: look again
                # Everything held below that block is passed over, so that
                # nothing handed out after this range lies under it.
                self._skipped += len(held) + sum(len(self._ready[i]) for i in range(joined, big))
                self._activate(_EMPTY)
                self._rest = None
                self._finish_block()
                for _ in range(big):
                    self._ready.popleft()
                self._start_block(self._ready.popleft())

    def _carve(self, held: range, n: int) -> range:
        """The first ``n`` of ``held``, what is left of the current block;
        the rest stays to be drawn."""
        taken, left = held[:n], held[n:]
        if self._rest is not None and left.start < self._rest.start:
            self._activate(range(left.start, self._rest.start, left.step))
        else:
            self._rest = None
            self._activate(left)
            self._request_prefetch()  # the mark is passed
        return taken

    # -- block boundaries (always with the lock held) --------------------------

    def _left_in_segment(self) -> range:
        remaining = self._position.__length_hint__()
        return self._segment[len(self._segment) - remaining :]

    def _held_run(self, current: range, n: int) -> tuple[range, int]:
        """The consecutive IDs held from ``current`` (what is left in the
        segment) on, up to ``n`` or more, and how many fetched blocks that
        run takes in: blocks that continue the current one (usual when one
        client uses a counter) make one run with it."""
        held = current if self._rest is None else _joined(current, self._rest)
        joined = 0
        for block in self._ready:
            if len(held) >= n or block.start != _after(held) or block.step != held.step:
                break
            held = _joined(held, block)
            joined += 1
        return held, joined

    def _can_serve(self, need: int) -> bool:
        """Whether what is held could give a caller ``need`` consecutive IDs
        (one, for next_id) without asking the service: from the current
        segment, the rest of the block, or a fetched block."""
        held, _ = self._held_run(self._left_in_segment(), need)
        return len(held) >= need or any(len(block) >= need for block in self._ready)

    def _activate(self, segment: range) -> None:
        if segment.stop <= sys.maxsize:
            self._position = self._ids = iter(segment)
        else:
            # Beyond a C long, range iterators compute in Python integers and
            # are no longer one atomic step; offsets from the start are.
            offsets = iter(range(len(segment)))
            self._position = offsets
            self._ids = map(segment.start.__add__ if segment.step == 1 else segment.__getitem__, offsets)
        self._segment = segment

    def _advance(self, deadline: float) -> None:
        """The current segment is used up: move to the next one, fetching if
        nothing is buffered. Raises when nothing can be had."""
        self._check_open()
        if self._rest is not None:
            self._activate(self._rest)
            self._rest = None
            self._request_prefetch()
            return
        self._finish_block()
        if not self._ready:
            # The lock is let go meanwhile, and another thread may start the
            # block that comes: the caller looks at the iterator again first.
            self._await_block(1, deadline)
            return
        self._start_block(self._ready.popleft())

    def _finish_block(self) -> None:
        if self._block is not None:
            self.sizer.block_finished(len(self._block), self.clock())
            self._block = None

    def _start_block(self, ids: range) -> None:
        # The later segment is what is left when the next block is requested.
        split = len(ids) - prefetch_tail(len(ids), self.prefetch_at, self.sizer.rate, self._latency)
        self._block = ids
        if self.prefetch and split > 0:
            self._activate(ids[:split])
            self._rest = ids[split:]
        else:
            self._activate(ids)
            self._rest = None
            self._request_prefetch()

    def _request_prefetch(self) -> None:
        if not self.prefetch or self._closed or self._ready or self._fetching:
            return
        if self._prefetcher is None:
            self._prefetcher = threading.Thread(
                target=_prefetch_loop,
                args=(weakref.ref(self), self._signal),
                name=f"idblocks-{self.counter}",
                daemon=True,
            )
            self._prefetcher.start()
        self._signal.want = True
        self._changed.notify_all()

    def _await_block(self, need: int, deadline: float) -> None:
        """Return once a block is fetched, fetching it when no other thread
        is, or once what is held could serve this thread after all. Raises
        what failed for good while this thread waited, its own request's
        failure, or ServiceUnavailable at ``deadline``; but only when
        nothing held could serve it: exhaustion, or any failure, is told
        after the last ID this thread could be given. Lets the lock go
        meanwhile."""
        seen = self._answers
        while not (self._ready and (need == 1 or any(len(block) >= need for block in self._ready))):
            self._check_open()
            if self._answers != seen:
                # While this thread slept, a block may have come, been
                # started by another thread and been followed by a refusal:
                # the last answer says nothing of what is held now.
                if self._failure is None or self._can_serve(need):
                    return  # look again
                if self._failure.final_for(need):
                    raise _fresh(self._failure.error)
            if not self._fetching:
                # Nobody is asking, or the last try failed in a way that
                # asking again may fix: this thread asks.
                if self._answers != seen and time.monotonic() >= deadline:
                    error = self._failure.error if self._failure else None
                    raise ServiceUnavailable(
                        f"no block for '{self.counter}' within {self.wait_timeout} s"
                    ) from error
                # Its failure is told at once: nothing held could serve this
                # thread when it came (nor since, with no answer), and no
                # other block lands while its own request is out.
                self._fetch(need)
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceUnavailable(f"no block for '{self.counter}' within {self.wait_timeout} s")
            self._changed.wait(left)

    def _check_open(self) -> None:
        if self._closed:
            raise SequenceClosed(f"Sequence('{self.counter}') is closed")

    # -- fetching ------------------------------------------------------------

    def _size_for(self, need: int) -> int:
        wanted = max(self.sizer.next_size(), min(self._take_hint, self.sizer.maximum))
        wanted = min(wanted, self._ceiling, self.max_batch)
        if self._room is not None:
            wanted = min(wanted, self._room)
        return max(need, wanted)

    def _fetch(self, need: int, *, only_pending: bool = False) -> None:
        """Send the pending request (or a new one for at least ``need`` IDs)
        until a block lands in ``_ready``; raise how it failed otherwise.
        With ``only_pending``, just the pending request, once. Called with
        the lock held, which is let go while on the network."""
        while True:
            request = self._pending
            if request is None:
                if only_pending:
                    return
                request = self._pending = _Request(uuid.uuid4().hex, self._size_for(need))
                self.sizer.demand_from(self.clock())
            self._fetching = True
            started = time.monotonic()
            self._lock.release()
            try:
                outcome: Block | BaseException = self.backend.allocate(
                    self.counter, request.size, idempotency_key=request.key
                )
            except BaseException as exc:  # noqa: BLE001 - settled below, under the lock
                outcome = exc
            finally:
                self._lock.acquire()
            self._fetching = False
            self._answers += 1
            self._changed.notify_all()
            if isinstance(outcome, Block | ServiceUnavailable):
                # Answered after capacity refusals, or failed with them.
                self.sizer.contended(outcome.capacity_refusals)
            if isinstance(outcome, Block):
                self._pending = None
                self._failure = None
                if len(outcome) != request.size:
                    self._skipped += len(outcome)
                    outcome = ServiceError(
                        500,
                        "bad_block",
                        f"asked for {request.size} IDs, the service answered with {len(outcome)}",
                    )
                else:
                    self._landed(outcome.ids(), time.monotonic() - started)
                    return
            elif not isinstance(outcome, ServiceError):
                # No answer (ServiceUnavailable, or anything else the backend
                # raised): the request may have been applied, so it is kept,
                # key and count, for the next try.
                self._failure = _Failure(outcome, request.size)
                raise outcome
            self._pending = None  # answered: the next request is a new one
            if _size_refusal(outcome) and request.size > 1:
                # Too large for the service, or for what the counter has left:
                # smaller requests may still go through.
                smaller = max(1, request.size // 2)
                if isinstance(outcome, InvalidRequest):
                    self._ceiling = min(self._ceiling, smaller)
                    self.sizer.cap(self._ceiling)
                else:
                    # Until a block comes: an admin may raise the counter's max.
                    self._room = smaller if self._room is None else min(self._room, smaller)
                self._failure = _Failure(outcome, request.size)
                if not only_pending and self._size_for(need) < request.size:
                    continue
            self._failure = _Failure(outcome, request.size)
            raise outcome

    def _landed(self, ids: range, seconds: float) -> None:
        self.requests += 1
        self._room = None
        self._latency = smoothed_latency(self._latency, seconds)
        if self.unused_ids is not None:
            self.unused_ids += len(ids)  # closed meanwhile: it is counted, not used
        else:
            self._ready.append(ids)

    def _prefetch_once(self) -> None:
        with self._lock:
            if self._closed or self._ready or self._fetching:
                return
            # A failure is kept in _failure for the threads that wait.
            with contextlib.suppress(Exception):
                self._fetch(1)

    # -- lifecycle -----------------------------------------------------------

    def close(self, timeout: float = CLOSE_TIMEOUT) -> int:
        """Stop prefetching and hand out nothing more. Returns, and keeps in
        ``unused_ids``, how many IDs of the blocks taken were never handed
        out. A block request on the network is waited for up to ``timeout``
        seconds; a block that lands later still adds to ``unused_ids``. A
        request whose answer was lost is asked again with its key (so it
        takes nothing new if it had been applied), up to CLOSE_ATTEMPTS times
        while ``timeout`` lasts, so that the block it took is counted too."""
        with self._lock:
            if self._closed:
                return self.unused_ids or 0
            self._closed = True
            self._signal.stop = True
            self._changed.notify_all()
            deadline = time.monotonic() + timeout
            while self._fetching:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            for attempt in range(CLOSE_ATTEMPTS):
                if timeout <= 0 or self._fetching or self._pending is None:
                    break
                if attempt and time.monotonic() >= deadline:
                    break
                with contextlib.suppress(Exception):
                    self._fetch(1, only_pending=True)
            return self._count_unused()

    def _count_unused(self) -> int:
        self._ids = _EXHAUSTED
        unused = len(self._left_in_segment()) + sum(map(len, self._ready)) + self._skipped
        if self._rest is not None:
            unused += len(self._rest)
        self._position = _EXHAUSTED
        self._segment = _EMPTY
        self._rest = None
        self._ready.clear()
        self.unused_ids = unused
        return unused

    def _after_fork_in_child(self) -> None:
        """The blocks, request and prefetcher belong to the parent: let them go."""
        closed = self._closed
        self._reset()
        self._closed = closed

    def __del__(self) -> None:
        signal = getattr(self, "_signal", None)
        if signal is None or self._closed:
            return
        with self._lock:
            self._closed = True
            signal.stop = True
            self._changed.notify_all()
            unused = self._count_unused()
        if not sys.is_finalizing():
            warnings.warn(
                f"Sequence('{self.counter}') was never closed; {unused} IDs went unused",
                ResourceWarning,
                stacklevel=1,
            )

    def __enter__(self) -> Sequence:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sequence({self.counter!r}, requests={self.requests}, closed={self._closed})"


# -- every Sequence in the process: fork and exit -----------------------------

_live: weakref.WeakSet[Sequence] = weakref.WeakSet()
_live_lock = threading.Lock()
_held_over_fork: list[Sequence] = []


def _before_fork() -> None:
    # No Sequence is mid-change when the process is copied, and the child
    # does not inherit a lock held by a thread it will not have. A block
    # request on the network is let finish first (for up to FORK_WAIT in
    # all), so that the backend is not copied in the middle of a request,
    # with its own locks held by a thread the child does not have.
    deadline = time.monotonic() + FORK_WAIT
    with _live_lock:  # not while another thread adds one
        sequences = list(_live)
    for seq in sequences:
        seq._lock.acquire()
        _held_over_fork.append(seq)
        while seq._fetching:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            seq._changed.wait(left)


def _after_fork_in_parent() -> None:
    while _held_over_fork:
        _held_over_fork.pop()._lock.release()


def _after_fork_in_child() -> None:
    while _held_over_fork:
        _held_over_fork.pop()._after_fork_in_child()


def _close_all_at_exit() -> None:
    # Without waiting on the network: the process is going away.
    for seq in list(_live):
        seq.close(timeout=0.0)


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)
atexit.register(_close_all_at_exit)
