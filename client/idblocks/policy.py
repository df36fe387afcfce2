"""The client's policy, shared by Sequence (threads) and AsyncSequence
(asyncio): how big a block to ask for and when, what a block request's answer
means for the next one, and how the IDs held are handed out and counted.

What the two drivers write each for themselves is only how they wait (a lock
and a condition, or the event loop) and how a request goes on the network (a
thread, or a task). Everything that decides which IDs are handed out, which
request is sent again and which failure is final lives here, once: a second
copy of that state machine is where duplicates would come from.
"""

from __future__ import annotations

import collections
import math
import operator
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from idblocks.backend import Block
from idblocks.errors import CounterExhausted, InvalidRequest, ServiceError, ServiceUnavailable

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


class BlockHolder:
    """The IDs a sequence holds and its one block request, without any
    waiting: every method runs to its end without letting other callers in
    (under Sequence's lock, or between two awaits of the event loop).

    A driver provides ``_request_prefetch()`` (start fetching the next block
    ahead, if it should) and calls ``_settle()`` with each answer."""

    backend: object
    counter: str
    prefetch: bool
    prefetch_at: float
    wait_timeout: float
    max_batch: int
    clock: Callable[[], float]
    sizer: BlockSizer
    unused_ids: int | None

    def _configure(
        self,
        backend: object,
        counter: str,
        *,
        prefetch: bool,
        block_size: int | None,
        initial_block: int,
        min_block: int,
        max_block: int,
        runway: float,
        max_runway: float | None,
        prefetch_at: float,
        wait_timeout: float,
        max_batch: int,
        clock: Callable[[], float],
    ) -> None:
        """The constructor's arguments, checked and kept (see Sequence)."""
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
        self.unused_ids = None  # set by close()

    def _hold_nothing(self) -> None:
        """At the start, and in a forked child."""
        self._ids: Iterator[int] = _EXHAUSTED  # what next_id draws from
        self._position: Iterator[int] = _EXHAUSTED  # a range iterator whose length_hint is what is left
        self._segment = _EMPTY  # the segment being drawn from
        self._rest: range | None = None  # the current block's later segment
        self._block: range | None = None  # the current block, for sizing
        self._ready: collections.deque[range] = collections.deque()  # fetched, not started
        self._pending: _Request | None = None  # made, not answered yet
        self._answers = 0  # requests answered or failed so far
        self._failure: _Failure | None = None  # how the last of them failed, if it did
        self._skipped = 0  # IDs passed over by take(), never handed out
        self.requests = 0  # block requests that succeeded

    def _request_prefetch(self) -> None:
        raise NotImplementedError

    # -- handing out what is held ------------------------------------------------

    def _next_segment(self) -> bool:
        """The current segment is used up: move to the next one held. False
        when nothing is held: a block must be fetched."""
        if self._rest is not None:
            self._activate(self._rest)
            self._rest = None
            self._request_prefetch()
            return True
        self._finish_block()
        if not self._ready:
            return False
        self._start_block(self._ready.popleft())
        return True

    def _take_from_held(self, n: int) -> range | None:
        """``n`` consecutive IDs from what is held, above everything handed
        out so far; None when a block of at least ``n`` must be fetched first."""
        while True:
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
                return None
            # Everything held below that block is passed over, so that
            # nothing handed out after this range lies under it.
            self._skipped += len(held) + sum(len(self._ready[i]) for i in range(joined, big))
            self._activate(_EMPTY)
            self._rest = None
            self._finish_block()
            for _ in range(big):
                self._ready.popleft()
            self._start_block(self._ready.popleft())

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

    def _left_in_segment(self) -> range:
        remaining = operator.length_hint(self._position)
        return self._segment[len(self._segment) - remaining :]

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

    # -- the block request -----------------------------------------------------

    def _size_for(self, need: int) -> int:
        wanted = max(self.sizer.next_size(), min(self._take_hint, self.sizer.maximum))
        wanted = min(wanted, self._ceiling, self.max_batch)
        if self._room is not None:
            wanted = min(wanted, self._room)
        return max(need, wanted)

    def _new_request(self, need: int) -> _Request:
        """A new pending request, for at least ``need`` IDs, with a key drawn
        now (in this process). Only when none is pending: a pending request
        is sent again as it is, key and count, until it is answered."""
        self._pending = _Request(uuid.uuid4().hex, self._size_for(need))
        self.sizer.demand_from(self.clock())
        return self._pending

    def _settle(self, request: _Request, outcome: Block | BaseException, seconds: float, need: int) -> bool:
        """What ``request`` was answered (a Block, or what its sending raised,
        after ``seconds``) means. True: the block landed in ``_ready``. False:
        the service refused the size and a smaller request (for ``need``) may
        go through: make it. Else raises how it failed, kept in
        ``_failure`` for whoever waited on it. A request without an answer
        stays pending, key and count, for the next try."""
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
                self._landed(outcome.ids(), seconds)
                return True
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
            if need and self._size_for(need) < request.size:
                return False
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
