"""Sequence: IDs of one counter, handed out from memory.

The IDs come in blocks (POST /counters/{name}/batch) and are served by a
plain iterator over the current block. Where the interpreter has a GIL,
``next()`` on a range iterator is one C call that advances the iterator before
anything can switch threads, so ``next_id`` needs no lock: two threads never
get the same ID. Builds without a GIL (free-threaded) take a lock instead.

Each block is served in two segments. When the first runs out, the next block
is requested in the background (prefetch), so in steady state the network is
never waited on. When the second runs out, the already-fetched block takes
over. Only these boundaries take the lock.

Block sizes adapt: each is sized to last ``runway`` seconds at the measured
rate, within [min_block, max_block]; a busy client makes few requests, an
idle one holds few unused IDs.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from types import TracebackType

from idblocks.backend import Backend, Block
from idblocks.errors import CounterExhausted, InvalidRequest, SequenceClosed, ServiceError, ServiceUnavailable

_EXHAUSTED: Iterator[int] = iter(())


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


class BlockSizer:
    """How many IDs to ask for next: enough for ``runway`` seconds at the
    consumption rate seen so far (a moving average), growing at most
    ``max_growth`` times per block so one burst does not over-reserve."""

    def __init__(
        self, initial: int, minimum: int, maximum: int, runway: float, max_growth: float = 8.0
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError("block sizes must satisfy 1 <= min_block <= initial_block <= max_block")
        if runway <= 0:
            raise ValueError("runway must be positive")
        self.minimum, self.maximum, self.runway, self.max_growth = minimum, maximum, runway, max_growth
        self.last = initial
        self.rate: float | None = None  # IDs per second

    def observe(self, consumed: int, seconds: float) -> None:
        """A block of ``consumed`` IDs lasted ``seconds``."""
        if consumed <= 0:
            return
        sample = consumed / max(seconds, 1e-6)
        self.rate = sample if self.rate is None else 0.5 * self.rate + 0.5 * sample

    def next_size(self) -> int:
        if self.rate is not None:
            wanted = self.rate * self.runway
            wanted = min(wanted, self.last * self.max_growth)
            self.last = int(min(self.maximum, max(self.minimum, wanted)))
        return self.last

    def cap(self, maximum: int) -> None:
        self.maximum = max(self.minimum, maximum)
        self.last = min(self.last, self.maximum)


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
        prefetch_at: float = 0.5,
        wait_timeout: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``block_size`` fixes every block's size (no adapting). ``prefetch_at``
        is the share of a block still unused when the next one is requested;
        it grows by itself when requests take longer than that share lasts.
        ``wait_timeout`` bounds how long ``next_id`` waits when nothing is
        buffered; the backend's retry policy usually gives up first."""
        if block_size is not None:
            initial_block = min_block = max_block = block_size
        if not 0 <= prefetch_at <= 1:
            raise ValueError("prefetch_at must be between 0 and 1")
        self.backend = backend
        self.counter = counter
        self.prefetch = prefetch
        self.prefetch_at = prefetch_at
        self.wait_timeout = wait_timeout
        self.clock = clock
        self.sizer = BlockSizer(initial_block, min_block, max_block, runway)

        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stats_lock = threading.Lock()
        self._ids: Iterator[int] = _EXHAUSTED  # what next_id draws from
        self._position: Iterator[int] = _EXHAUSTED  # a range iterator whose length_hint is what is left
        self._segment = range(0)  # the segment being drawn from
        self._generation = 0  # counts segment switches
        self._rest: collections.deque[range] = collections.deque()  # the current block's later segment
        self._ready: collections.deque[Block] = collections.deque()  # fetched, not started
        self._block_started: float | None = None
        self._block_size = 0
        self._want_block = False
        self._fetching = False
        self._error: Exception | None = None
        self._unfinished: tuple[str, int] | None = None  # (idempotency key, size) of a failed block request
        self._latency: float | None = None
        self._closed = False
        self.requests = 0  # block requests that succeeded
        self.unused_ids: int | None = None  # set by close()

        if not gil_enabled():
            self.next_id = self._next_id_locked  # type: ignore[method-assign]
        self._prefetcher: threading.Thread | None = None
        if prefetch:
            self._prefetcher = threading.Thread(
                target=self._prefetch_loop, name=f"idblocks-{counter}", daemon=True
            )
            self._prefetcher.start()

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
            while True:
                try:
                    return next(self._ids)  # another thread moved on already
                except StopIteration:
                    self._advance()

    def take(self, n: int) -> range:
        """``n`` consecutive IDs, as a range. They come from the current block
        when it has ``n`` left, else from a later block (and what is left of
        the current block is still handed out by ``next_id``)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        with self._lock:
            self._check_open()
            # From here no other thread can draw: next_id finds an empty
            # iterator and waits for the lock.
            self._ids = _EXHAUSTED
            current = self._left_in_segment()
            # The block's later segment, if still ahead, follows on from this one.
            later = self._rest.popleft() if self._rest else None
            if not current and later is not None:
                current, later = later, None
                self._request_block()  # now in the later segment: the mark is passed
            run = range(current.start, later.stop if later else current.stop)
            if len(run) < n:
                # What is left of this block stays for next_id; take from a later block.
                self._activate(current)
                if later is not None:
                    self._rest.append(later)
                return self._take_from_later_blocks(n)
            taken, left = run[:n], run[n:]
            if later is not None and left.start < later.start:
                self._activate(range(left.start, later.start))
                self._rest.append(later)
            else:
                self._activate(left)
                self._request_block()  # the mark is passed
            return taken

    def _take_from_later_blocks(self, n: int) -> range:
        for index, block in enumerate(self._ready):
            if len(block) >= n:
                del self._ready[index]
                if len(block) > n:
                    self._ready.appendleft(Block(block.start + n, block.end))
                return range(block.start, block.start + n)
        # No fetched block is big enough: ask for one of at least n, now.
        block = self._fetch(max(n, self.sizer.next_size()), retry_key=False, may_shrink=False)
        if len(block) > n:
            self._ready.append(Block(block.start + n, block.end))
            self._changed.notify_all()  # a thread waiting for a block can have the rest
        return range(block.start, block.start + n)

    # -- block boundaries (always with the lock held) --------------------------

    def _left_in_segment(self) -> range:
        remaining = self._position.__length_hint__()
        return range(self._segment.stop - remaining, self._segment.stop)

    def _activate(self, segment: range) -> None:
        if segment.stop <= sys.maxsize:
            self._position = self._ids = iter(segment)
        else:
            # Beyond a C long, range iterators compute in Python integers and
            # are no longer one atomic step; offsets from the start are.
            offsets = iter(range(len(segment)))
            self._position = offsets
            self._ids = map(segment.start.__add__, offsets)
        self._segment = segment
        self._generation += 1
        self._changed.notify_all()  # a thread waiting for IDs can go on

    def _advance(self) -> None:
        """The current segment is used up: move to the next one, fetching if
        nothing is buffered. Raises when nothing can be had."""
        self._check_open()
        if self._rest:
            self._activate(self._rest.popleft())
            self._request_block()
            return
        now = self.clock()
        if self._block_started is not None:
            self.sizer.observe(self._block_size, now - self._block_started)
            self._block_started = None
        if not self._ready:
            if not self.prefetch:
                self._ready.append(self._fetch(self.sizer.next_size(), retry_key=True))
            else:
                generation = self._generation
                self._wait_for_block(generation)
                if self._generation != generation:
                    return  # another thread started the block meanwhile
        self._start_block(self._ready.popleft(), now)

    def _start_block(self, block: Block, now: float) -> None:
        ids = block.ids()
        # The later segment is what is left when the next block is requested:
        # the prefetch_at share, or more if a request takes longer than that lasts.
        tail = math.ceil(len(ids) * self.prefetch_at)
        if self.sizer.rate and self._latency:
            tail = max(tail, math.ceil(self.sizer.rate * self._latency * 2))
        split = ids.stop - min(tail, len(ids))
        self._block_started, self._block_size = now, len(ids)
        if split > ids.start:
            self._activate(range(ids.start, split))
            self._rest.append(range(split, ids.stop))
        else:
            self._activate(ids)
            self._request_block()

    def _request_block(self) -> None:
        if self.prefetch and not self._ready and not self._fetching:
            self._want_block = True
            self._changed.notify_all()

    def _wait_for_block(self, generation: int) -> None:
        """Wait (releasing the lock) until a block is fetched or another thread
        moved on; raise what the fetch failed with, or on timeout."""
        self._error = None
        self._request_block()
        deadline = time.monotonic() + self.wait_timeout
        while not self._ready and self._generation == generation:
            self._check_open()
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceUnavailable(f"no block for '{self.counter}' within {self.wait_timeout} s")
            self._changed.wait(left)

    def _check_open(self) -> None:
        if self._closed:
            raise SequenceClosed(f"Sequence('{self.counter}') is closed")

    # -- fetching ------------------------------------------------------------

    def _fetch(self, size: int, *, retry_key: bool, may_shrink: bool = True) -> Block:
        """Ask the service for a block of ``size``. Called with the lock held
        (no prefetch, and take) or without it (the prefetcher); it touches no
        shared state but ``_unfinished``, which only one of those uses.

        With ``retry_key``, a request that failed even after the backend's
        retries keeps its Idempotency-Key, so asking again finds the block if
        it was taken after all."""
        if not retry_key or self._unfinished is None or self._unfinished[1] != size:
            key = uuid.uuid4().hex
        else:
            key = self._unfinished[0]
        if retry_key:
            self._unfinished = (key, size)
        started = time.monotonic()
        try:
            block = self.backend.allocate(self.counter, size, idempotency_key=key)
        except ServiceError as exc:
            # The service answered, so this request is settled and the next
            # gets a new key. (ServiceUnavailable is not a ServiceError: its
            # outcome is unknown, and the key is kept.)
            if retry_key:
                self._unfinished = None
            if not may_shrink:
                raise
            if isinstance(exc, InvalidRequest) and exc.code == "invalid_count" and size > self.sizer.minimum:
                self.sizer.cap(size // 2)  # over the service's MaxBatchSize
                return self._fetch(self.sizer.next_size(), retry_key=retry_key)
            if isinstance(exc, CounterExhausted) and size > 1:
                # Fewer IDs than a block may be left: take them in smaller blocks.
                return self._fetch(size // 2, retry_key=retry_key)
            raise
        if retry_key:
            self._unfinished = None
        if len(block) != size:
            raise ServiceError(
                500, "bad_block", f"asked for {size} IDs, the service answered with {len(block)}"
            )
        self._note_request(time.monotonic() - started)
        return block

    def _note_request(self, seconds: float) -> None:
        with self._stats_lock:  # the prefetcher and take() may both be fetching
            self._latency = seconds if self._latency is None else 0.5 * self._latency + 0.5 * seconds
            self.requests += 1

    def _prefetch_loop(self) -> None:
        with self._lock:
            while True:
                while not (self._want_block or self._closed):
                    self._changed.wait()
                if self._closed:
                    return
                self._want_block = False
                if self._ready:
                    continue
                self._fetching = True
                size = self.sizer.next_size()
                self._lock.release()
                try:
                    result: Block | Exception = self._fetch(size, retry_key=True)
                except Exception as exc:  # noqa: BLE001 - handed to the consumer, who raises it
                    result = exc
                finally:
                    self._lock.acquire()
                    self._fetching = False
                if isinstance(result, Block):
                    self._ready.append(result)
                else:
                    self._error = result
                self._changed.notify_all()

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> int:
        """Stop prefetching and hand out nothing more. Returns, and keeps in
        ``unused_ids``, how many IDs of the blocks held were never handed out."""
        with self._lock:
            if self._closed:
                return self.unused_ids or 0
            self._closed = True
            self._changed.notify_all()
        if self._prefetcher is not None:
            self._prefetcher.join(timeout=self.wait_timeout)
        with self._lock:
            self._ids = _EXHAUSTED
            unused = len(self._left_in_segment()) + sum(map(len, self._rest)) + sum(map(len, self._ready))
            self._position = _EXHAUSTED
            self._rest.clear()
            self._ready.clear()
            self.unused_ids = unused
        return unused

    def __enter__(self) -> Sequence:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sequence({self.counter!r}, requests={self.requests}, closed={self._closed})"
