"""The IDs a sequence holds, and how they are handed out: the current
block's two segments (the second starts when the next block is asked for),
the blocks fetched and not started, consecutive runs for take(n), and the
count of IDs never handed out. Part of the policy Sequence and AsyncSequence
share (idblocks.policy); nothing here waits or sends."""

from __future__ import annotations

import collections
import operator
import sys
from collections.abc import Callable, Iterator

from idblocks.sizing import BlockSizer, prefetch_tail

_EXHAUSTED: Iterator[int] = iter(())
_EMPTY = range(0)


def _after(ids: range) -> int:
    """The ID a block continuing ``ids`` would start with (its step apart)."""
    return ids.start + len(ids) * ids.step


def _joined(first: range, then: range) -> range:
    """``first`` and ``then``, which continues it, as one range."""
    return range(first.start, _after(then), first.step)


class HeldIds:
    """What is held, drawn from without a lock: ``next_id`` is ``next()`` on
    ``_ids``. A subclass provides ``_request_prefetch()``: start fetching
    the next block ahead, if it should."""

    prefetch: bool
    prefetch_at: float
    clock: Callable[[], float]
    sizer: BlockSizer
    _latency: float | None
    # How many IDs taken were never handed out: set by the first close that
    # counts, and added to by every block landing after it.
    unused_ids: int | None

    def _hold_nothing(self) -> None:
        """At the start, and in a forked child."""
        self._ids: Iterator[int] = _EXHAUSTED  # what next_id draws from
        self._position: Iterator[int] = _EXHAUSTED  # a range iterator whose length_hint is what is left
        self._segment = _EMPTY  # the segment being drawn from
        self._rest: range | None = None  # the current block's later segment
        self._block: range | None = None  # the current block, for sizing
        self._ready: collections.deque[range] = collections.deque()  # fetched, not started
        self._skipped = 0  # IDs never to be handed out: passed over by take(), refused, dropped
        self._refused = 0  # of those, the IDs of answers refused (never held)

    def _request_prefetch(self) -> None:
        raise NotImplementedError

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
            big = next((i for i, block in enumerate(self._ready) if len(block) >= n), None)
            if big is None:
                self._activate(current)  # not enough: the others draw on meanwhile
                return None
            # Everything held below that block is passed over, so that
            # nothing handed out after this range lies under it: counted
            # while no other thread draws, so that none it draws is counted.
            self._unused(len(held) + sum(len(self._ready[i]) for i in range(joined, big)))
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

    def _held(self) -> int:
        """How many IDs are held, in all."""
        return len(self._left_in_segment()) + len(self._rest or ()) + sum(map(len, self._ready))

    def _not_handed_out(self) -> int:
        """How many IDs of the blocks taken were not handed out: held, passed
        over by take(), or dropped at a restore; not those of answers
        refused, which were never held. What the start bound weighs
        against what was used (idblocks.sizing)."""
        return self._held() + self._skipped - self._refused

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
        tail = prefetch_tail(
            len(ids), self.prefetch_at, self.sizer.rate, self._latency, self.sizer.young_tail()
        )
        split = len(ids) - tail
        self._block = ids
        if self.prefetch and split > 0:
            self._activate(ids[:split])
            self._rest = ids[split:]
        else:
            self._activate(ids)
            self._rest = None
            self._request_prefetch()

    # -- counting what is not handed out ----------------------------------------------

    def _unused(self, count: int) -> None:
        """``count`` IDs taken will never be handed out: counted in what
        close reports, or, once a close has counted, added to unused_ids."""
        if self.unused_ids is None:
            self._skipped += count
        else:
            self.unused_ids += count

    def _refuse(self, count: int) -> None:
        """An answer of ``count`` IDs is not handed out (the wrong size, or
        IDs this sequence was given before): unused, and never held."""
        self._unused(count)
        if self.unused_ids is None:
            self._refused += count

    def _freeze(self) -> int:
        """Stop every thread drawing (next_id finds nothing, and waits for
        the lock), then count what is held and what was passed over: counted
        after the stop, so that no ID another thread draws is counted too."""
        self._ids = _EXHAUSTED
        return self._held() + self._skipped

    def _count_unused(self) -> int:
        """Close's count: everything held, and everything passed over, is now
        unused; returns the total so far (earlier closes' counts included)."""
        held = self._freeze()
        self._position = _EXHAUSTED
        self._segment = _EMPTY
        self._rest = None
        self._ready.clear()
        self._skipped = self._refused = 0
        self.unused_ids = (self.unused_ids or 0) + held
        return self.unused_ids
