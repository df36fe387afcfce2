"""How big a block to ask for, and when: the sizes a Sequence (and an
AsyncSequence) asks for adapt to the rate IDs are used at, lengthen their
runway when the counter is hot, and the next block is asked for while the
current one still has enough left to last a request. Pure: a simulation of
many clients (bench/scale.py) decides as a Sequence does."""

from __future__ import annotations

import math

# The service's default MaxBatchSize.
DEFAULT_MAX_BATCH = 1_000_000

# The longest a block is sized to last, by default, however hot the counter:
# blocks of a few minutes let a fleet of 10^4 busy clients share one counter's
# ~1,000 writes/s (clients / runway writes/s) with room to spare, and a client
# stopping leaves at most that long's worth of IDs unused.
MAX_RUNWAY = 300.0


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
