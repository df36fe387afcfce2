"""How big a block to ask for, and when: the sizes a Sequence (and an
AsyncSequence) asks for adapt to the rate IDs are used at, lengthen their
runway when the counter is hot, and the next block is asked for while the
current one still has enough left to last a request. Pure: a simulation of
many clients (bench/scale.py) decides as a Sequence does.

Two rules keep what a process skips when it stops in proportion to what it
used. While a sequence is young, a block request never brings what it holds
above what it has used (the start bound: a process that stops at any moment
has skipped at most as many IDs as it used, give or take its first block),
and the next block is asked for late enough that it can still be nearly as
big as everything taken before it (so sizes still about double per block).
Once a sequence has used a runway's worth at its rate, neither rule binds
and the sizes are the rate's. And ``drain()``, for a process about to stop,
sizes every block from then on for DRAIN_RUNWAY seconds."""

from __future__ import annotations

import math

# The service's default MaxBatchSize.
DEFAULT_MAX_BATCH = 1_000_000

# The longest a block is sized to last, by default, however hot the counter:
# blocks of a few minutes let a fleet of 10^4 busy clients share one counter's
# ~1,000 writes/s (clients / runway writes/s) with room to spare, and a client
# stopping leaves at most that long's worth of IDs unused.
MAX_RUNWAY = 300.0

# The first block a Sequence asks for, unless told otherwise: a process that
# takes one ID and stops skips at most 15.
INITIAL_BLOCK = 16

# How many seconds of IDs a draining sequence's blocks hold: about one block
# while a load balancer takes a process out of service, short enough that
# little is left when it stops, long enough (with prefetch_tail's two
# request latencies) that the next block is on its way in time.
DRAIN_RUNWAY = 0.5

# While young, the next block is asked for when at most this share of all
# the IDs taken is left (BlockSizer.young_tail), so that the start bound
# still lets it be 15/16 of them: from a first block of 16, about 1.94 times
# as many taken per block (11 requests to 10,000 IDs taken as fast as they
# can be).
YOUNG_TAIL_SHARE = 1 / 32


def prefetch_tail(
    size: int, prefetch_at: float, rate: float | None, latency: float | None, most: int | None = None
) -> int:
    """How many IDs of a block of ``size`` are still unused when the next
    block is requested: the ``prefetch_at`` share, or, when a request takes
    longer than that share lasts, two requests' worth at ``rate`` IDs/s (the
    block sizer's estimate) and ``latency`` seconds (smoothed_latency's);
    never more than the block, nor than ``most`` (BlockSizer.young_tail():
    a young sequence that asked earlier could only ask for less). Pure, so
    that a simulation of many clients decides as a Sequence does."""
    tail = math.ceil(size * prefetch_at)
    if rate and latency:
        tail = max(tail, math.ceil(rate * latency * 2))
    if most is not None:
        tail = min(tail, most)
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
    costs is bigger blocks, and more IDs unused when the client stops.

    The start bound (``bounded_start``; off, the sizes of idblocks 1.0, for
    comparisons): ``next_size(held)`` is at most what was used (the IDs
    taken, told by ``landed``, less those still held) less what is held,
    and at least ``minimum``; the first block is ``initial``. So what is
    held never exceeds what was used, however soon the client stops; it
    stops binding once a runway's worth has been used, and is lifted by
    the first capacity refusal (a hot counter cannot afford the dozen
    small requests it costs: sizes then grow max_growth times a block).
    ``drain()``: from then on the runway is DRAIN_RUNWAY (capacity refusals
    still lengthen it), for a process about to stop."""

    def __init__(
        self,
        initial: int,
        minimum: int,
        maximum: int,
        runway: float,
        max_growth: float = 8.0,
        max_runway: float | None = None,
        *,
        bounded_start: bool = True,
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
        # The start bound applies until a capacity refusal: a hot counter
        # cannot afford the many small requests it costs.
        self.bounded = bounded_start
        self.taken = 0  # IDs of the blocks that landed
        self.draining = False

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
            self.bounded = False
            # Bounded exponent: past 2**64 every runway is at max_runway anyway.
            self.current_runway = min(self.max_runway, self.current_runway * 2.0 ** min(refusals, 64))

    def landed(self, count: int) -> None:
        """A block of ``count`` IDs landed: they are taken."""
        self.taken += count

    def drain(self) -> None:
        """The process is about to stop: size blocks for DRAIN_RUNWAY
        seconds from now on (or the runway, if shorter)."""
        self.draining = True
        self.current_runway = min(self.current_runway, DRAIN_RUNWAY)

    def first_rate(self, used: int, now: float) -> None:
        """No block has run out yet, and ``used`` IDs were used between the
        first demand (demand_from) and ``now``: that is the rate, for a
        sequence drained before it knew one (its first block given by the
        caller, say)."""
        if self.rate is None and self._since is not None:
            self.observe(used, now - self._since)

    def young_tail(self) -> int | None:
        """The most IDs a block just started may still hold when the next is
        asked for (prefetch_tail's ``most``), while the start bound could
        make that next block smaller than the sizes asked for now: few
        enough that it need not, or YOUNG_TAIL_SHARE of the IDs taken (this
        block included), at least one. None when the bound cannot bind
        (fixed sizes, or the bound off)."""
        wanted = self._wanted()
        if not self.bounded or self.minimum >= wanted:
            return None
        return max(1, math.ceil(self.taken * YOUNG_TAIL_SHARE), (self.taken - wanted) // 2)

    def _wanted(self) -> int:
        """The size the rate asks for now: a runway's worth, growing at most
        max_growth times on the last, within minimum and maximum."""
        if self.rate is None:
            return self.last
        wanted = min(self.rate * self.current_runway, self.last * self.max_growth)
        return int(min(self.maximum, max(self.minimum, wanted)))

    def next_size(self, held: int = 0) -> int:
        """The size of the next block, with ``held`` IDs of those taken not
        handed out now (held, or passed over)."""
        self.last = self._wanted()
        return self.within_start_bound(self.last, held)

    def within_start_bound(self, size: int, held: int) -> int:
        """``size``, or less while the start bound applies: with ``held`` IDs
        of those taken not handed out, what is then not handed out is at
        most what was used."""
        if self.bounded and self.taken:
            # used - held, where used = taken - held: what is not handed out
            # after this block lands is at most what was used before it.
            return min(size, max(self.minimum, self.taken - 2 * held))
        return size

    def cap(self, maximum: int) -> None:
        self.maximum = max(self.minimum, min(self.maximum, maximum))
        self.last = min(self.last, self.maximum)
