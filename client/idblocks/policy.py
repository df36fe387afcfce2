"""The client's policy, shared by Sequence (threads) and AsyncSequence
(asyncio): the arguments both take, what a block request's answer means for
the next one, when a request may be sent again, how the IDs held are handed
out and counted (idblocks.holding), and what close does next.

What the two drivers write each for themselves is only how they wait (a lock
and a condition, or the event loop) and how a request goes on the network (a
thread, or a task). Everything that decides which IDs are handed out, which
request is sent again and which failure is final lives here, once: a second
copy of that state machine is where duplicates would come from. How big a
block to ask for, and when, is idblocks.sizing's.
"""

from __future__ import annotations

import math
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from idblocks import snapstart
from idblocks.block import Block
from idblocks.errors import (
    COUNTER_MOVED_BACK,
    CounterExhausted,
    CounterMovedBack,
    InvalidRequest,
    SequenceClosed,
    ServiceError,
    ServiceUnavailable,
    copy_of,
)
from idblocks.holding import HeldIds
from idblocks.sizing import DEFAULT_MAX_BATCH, INITIAL_BLOCK, MAX_RUNWAY, BlockSizer, smoothed_latency

# How long close() waits, by default, for a block request on the network to be
# answered, so that the block it brings is counted: HttpBackend's default
# timeout for one request.
CLOSE_TIMEOUT = 10.0

# How many times close() asks for a request whose answer was lost (the
# backend retries within each), while its timeout lasts.
CLOSE_ATTEMPTS = 3

B = TypeVar("B")  # the backend: a Backend, or an AsyncBackend


def check_seconds(value: float, what: str) -> float:
    """``value`` if it is a number of seconds, 0 to infinity; else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{what} must be a number of seconds, 0 or more (inf: no limit), not {value!r}")
    return float(value)


@dataclass(frozen=True)
class _Request:
    """A block request: fixed when first made, repeated as is until answered.
    ``began``: the restores from a snapshot when its key was drawn; it is
    never sent after another (idblocks.snapstart)."""

    key: str
    size: int
    began: int


@dataclass(frozen=True)
class _Failure:
    """How the last answered request failed, for the callers that waited on it;
    ``not_before``: when the service said it may be asked again (its
    Retry-After), on the sequence's clock."""

    error: BaseException
    size: int  # the count that was refused
    not_before: float = -math.inf

    def final_for(self, need: int) -> bool:
        """Whether a caller needing ``need`` IDs can hope for nothing better.
        Refusals of a size (too large, or more than the counter has left)
        still let a smaller request through; no answer at all is retried,
        unless nothing has ever answered there (asking again at once would
        find nothing there again)."""
        if isinstance(self.error, ServiceUnavailable):
            return self.error.never_answered
        if not isinstance(self.error, Exception):
            return False
        return not _size_refusal(self.error) or need >= self.size


def _size_refusal(error: BaseException) -> bool:
    return isinstance(error, CounterExhausted) or (
        isinstance(error, InvalidRequest) and error.code == "invalid_count"
    )


class BlockHolder(HeldIds, Generic[B]):
    """The IDs a sequence holds and its one block request, without any
    waiting: every method runs to its end without letting other callers in
    (under Sequence's lock, or between two awaits of the event loop).

    A driver provides ``_reset()`` (hold nothing), ``_start_afresh()`` (hold
    nothing, its callers kept: also in a forked child and after a restore),
    ``_opened()`` (made), ``_in_flight()`` (a request is on the network),
    ``_request_prefetch()`` (start fetching the next block ahead, if it
    should), and calls ``_settle()`` with each answer."""

    def __init__(
        self,
        backend: B,
        counter: str,
        *,
        prefetch: bool = True,
        block_size: int | None = None,
        initial_block: int | None = None,
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
        ``take(n)`` asks for at least ``n``. ``initial_block``: the first
        block's size (by default INITIAL_BLOCK, 16, within min_block and
        max_block); later ones adapt to the rate, and while the sequence is
        young never bring what it holds above what it has used (see
        idblocks.sizing), so give it when the count or rate is known.
        ``prefetch_at`` is the share of a block still unused when the next
        one is requested; it grows by itself when requests take longer than
        that share lasts.
        ``wait_timeout`` bounds how long a call waits for a block (inf: no
        bound); each request is bounded by the backend's retry policy.
        ``max_batch`` is the service's MaxBatchSize: the largest
        ``take(n)``. ``runway`` is how many seconds a block should last;
        each capacity refusal a block request meets (the counter is hot)
        doubles it, up to ``max_runway`` (by default MAX_RUNWAY, or
        ``runway`` if that is longer). ``clock``: the seconds rates and
        deadlines are measured in (an AsyncSequence's must be its event
        loop's, as time.monotonic is)."""
        if block_size is not None:
            initial_block = min_block = max_block = block_size
        elif initial_block is None:
            initial_block = min(max(INITIAL_BLOCK, min_block), max_block)
        if not 0 <= prefetch_at <= 1:
            raise ValueError("prefetch_at must be between 0 and 1")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, not {max_batch!r}")
        self.backend = backend
        self.counter = counter
        self.prefetch = prefetch
        self.prefetch_at = prefetch_at
        self.wait_timeout = check_seconds(wait_timeout, "wait_timeout")
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
        self.unused_ids = None
        # The highest ID of every block answered, by region (its step and
        # residue): a block at or below it is refused. Kept in a forked
        # child and after a restore: what the counter gave is still given.
        self._highest: dict[tuple[int, int], int] = {}
        # A counter that moved back, found by a request no caller waited
        # for: told to the next caller that needs a block.
        self._untold: CounterMovedBack | None = None
        self._reset()
        self._opened()

    def _reset(self) -> None:
        raise NotImplementedError

    def _opened(self) -> None:
        raise NotImplementedError

    def _in_flight(self) -> bool:
        raise NotImplementedError

    def _start_afresh(self) -> None:
        raise NotImplementedError

    def _after_restore(self) -> None:
        """Restored from a snapshot (Lambda SnapStart), which every restored
        environment shares: what this one holds, and the request it made,
        each of them holds and made too. Start afresh, as in a forked child,
        and count what was held in ``unused_ids``: no other process goes on
        to hand it out. The next request is a new one, with a new key."""
        dropped, refused = self._freeze(), self._refused
        self._start_afresh()
        self._unused(dropped)
        self._refused = refused

    def _check_take(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        if n > self.max_batch:
            raise ValueError(f"n must be at most max_batch ({self.max_batch}), not {n}")

    def _check_open(self) -> None:
        if self._closed:
            raise SequenceClosed(f"{type(self).__name__}('{self.counter}') is closed")

    def _too_long(self) -> ServiceUnavailable:
        return ServiceUnavailable(f"no block for '{self.counter}' within {self.wait_timeout} s")

    def _hold_nothing(self) -> None:
        """At the start, and in a forked child."""
        super()._hold_nothing()
        self._pending: _Request | None = None  # made, not answered yet
        self._answers = 0  # requests answered or failed so far
        self._failure: _Failure | None = None  # how the last of them failed, if it did
        self.requests = 0  # block requests that succeeded

    def _resend_at(self) -> float:
        """When the pending request may be sent again: at once, unless the
        service's last answer asked to wait (Retry-After)."""
        return self._failure.not_before if self._failure is not None else -math.inf

    def _failed_for(self, need: int, answered: bool, deadline: float) -> BaseException | None:
        """The error a caller needing ``need`` IDs by ``deadline`` hears now,
        having found nothing held that serves it: the last failure, if it is
        final and was answered while the caller waited (``answered``), or
        the service's last refusal if it asked to wait past the deadline
        (nothing better can come by then). Each caller its own instance."""
        if self._untold is not None:
            told, self._untold = self._untold, None
            return copy_of(told)
        failure = self._failure
        if failure is None:
            return None
        if answered and failure.final_for(need):
            return copy_of(failure.error)
        if failure.not_before > deadline and not self._in_flight():
            return copy_of(failure.error)
        return None

    def _next_on_close(self, asked: int, timeout: float, deadline: float) -> float | None:
        """What close does next, until it counts: None, count now; 0, ask
        again (with its key) for the pending request, whose answer was lost;
        seconds, wait that long for the request on the network or for the
        time the service said to wait. ``asked``: how often this close has
        asked already; ``timeout`` and ``deadline``: the close's."""
        now = self.clock()
        if self._in_flight():
            return deadline - now if now < deadline else None
        if self._pending is None or timeout <= 0 or asked >= CLOSE_ATTEMPTS or (asked and now >= deadline):
            return None
        resend_at = self._resend_at()
        if resend_at > now:
            return resend_at - now if resend_at < deadline else None
        return 0.0

    # -- the block request -----------------------------------------------------

    def drain(self) -> None:
        """The process is about to stop: from now on, blocks are sized for a
        short runway (DRAIN_RUNWAY, about half a second at the rate IDs are
        used) while the sequence goes on serving; IDs already held are
        handed out first, and close works as before. Called as early as the
        process knows it will stop while it still serves (a preStop hook,
        a SIGTERM before a grace period), it leaves about half a second's
        worth of IDs held at the stop (at most a second's) instead of up to
        1.5 runways' worth. Waits
        for nothing, takes no lock and sends nothing, so a signal handler
        may call it; calling it again, or once closed, changes nothing."""
        self.sizer.drain()

    @property
    def draining(self) -> bool:
        """Whether drain() was called."""
        return self.sizer.draining

    def _size_for(self, need: int, held: int | None = None) -> int:
        """How many IDs a new request asks for: at least ``need``. ``held``:
        the IDs held unused, if not this holder's own (a simulation's)."""
        if held is None:
            held = self._not_handed_out()
        # Asked for at least the last take(n), as far as the start bound allows.
        hint = self.sizer.within_start_bound(min(self._take_hint, self.sizer.maximum), held)
        wanted = max(self.sizer.next_size(held), hint)
        wanted = min(wanted, self._ceiling, self.max_batch)
        if self._room is not None:
            wanted = min(wanted, self._room)
        return max(need, wanted)

    def _new_request(self, need: int) -> _Request:
        """A new pending request, for at least ``need`` IDs, with a key drawn
        now (in this process). Only when none is pending: a pending request
        is sent again as it is, key and count, until it is answered."""
        now, held = self.clock(), self._not_handed_out()
        if self.sizer.draining:
            # Drained before a block ran out: what was used so far is the rate.
            self.sizer.first_rate(self.sizer.taken - held, now)
        self._pending = _Request(uuid.uuid4().hex, self._size_for(need, held), snapstart.restores)
        self.sizer.demand_from(now)
        return self._pending

    def _settle(self, request: _Request, outcome: Block | BaseException, seconds: float, need: int) -> bool:
        """What ``request`` was answered (a Block, or what its sending raised,
        after ``seconds``) means. True: the block landed in ``_ready``. False:
        the service refused the size and a smaller request (for ``need``) may
        go through: make it. Else raises how it failed, kept in
        ``_failure`` for whoever waited on it. A request without an answer
        stays pending, key and count, for the next try, not before the time
        the service said to wait."""
        if isinstance(outcome, Block | ServiceUnavailable):
            # Answered after capacity refusals, or failed with them.
            self.sizer.contended(outcome.capacity_refusals)
        if isinstance(outcome, Block):
            self._pending = None
            self._failure = None
            moved_back = self._moved_back(outcome)
            if moved_back is None and len(outcome) == request.size:
                self._landed(outcome.ids(), seconds)
                return True
            self._refuse(len(outcome))
            outcome = moved_back or ServiceError(
                500, "bad_block", f"asked for {request.size} IDs, the service answered with {len(outcome)}"
            )
        elif not isinstance(outcome, ServiceError):
            # No answer (ServiceUnavailable, or anything else the backend
            # raised): the request may have been applied, so it is kept,
            # key and count, for the next try.
            wait = getattr(outcome, "retry_after", None)
            not_before = -math.inf if wait is None else self.clock() + wait
            self._failure = _Failure(outcome, request.size, not_before)
            raise outcome
        self._pending = None  # answered: the next request is a new one
        self._failure = _Failure(outcome, request.size)
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
            if need and self._size_for(need) < request.size:
                return False
        raise outcome

    def _moved_back(self, block: Block) -> CounterMovedBack | None:
        """CounterMovedBack if ``block`` starts at or below the highest ID of
        the blocks answered before from its region: the counter gave out
        again IDs it gave this sequence (a region's IDs only increase, and
        another region's are of another residue). Either way its end is
        from now on the highest it must lie above."""
        region = (block.step, block.start % block.step)
        highest = self._highest.get(region)
        self._highest[region] = block.end if highest is None else max(highest, block.end)
        if highest is None or block.start > highest:
            return None
        return CounterMovedBack(
            0,
            COUNTER_MOVED_BACK,
            f"'{self.counter}' answered the block [{block.start}, {block.end}] (step {block.step}), at or"
            f" below {highest}, the highest ID of the blocks this {type(self).__name__} was given before:"
            " the counter moved back (restored from a backup?); none of that block is handed out",
        )

    def _unheard(self, error: BaseException) -> None:
        """``error`` settled a request no caller waits for (a prefetch): a
        counter that moved back is told to the next caller that needs a
        block, and until then no block is fetched ahead."""
        if isinstance(error, CounterMovedBack):
            self._untold = error

    def _landed(self, ids: range, seconds: float) -> None:
        self.requests += 1
        self.sizer.landed(len(ids))
        self._room = None
        self._latency = smoothed_latency(self._latency, seconds)
        if self.unused_ids is not None:
            self.unused_ids += len(ids)  # closed meanwhile: it is counted, not used
        else:
            self._ready.append(ids)

    # -- what both drivers say alike ---------------------------------------------------

    def _warn_unclosed(self, unused: int) -> None:
        if not sys.is_finalizing():
            warnings.warn(
                f"{type(self).__name__}('{self.counter}') was never closed; {unused} IDs went unused",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.counter!r}, requests={self.requests}, closed={self._closed})"
