"""What this function environment has taken from each counter: the highest
ID of every fresh block it was given (batch, next, a block taken for cached
next), so that a counter whose item moved back is refused instead of handing
out IDs again.

A counter's item can move back where no write of ours moves it: a table
restored from a backup (point-in-time recovery, an on-demand backup), an item
lowered or deleted by hand, a stack deleted and deployed again onto an old
copy of its table. The store only ever moves the high-water mark forward, so
after such a move the next allocations would hand out IDs that callers
already hold. Every allocation sends this environment's mark of its counter
with its write (CounterStore.reserve_block's ``taken_up_to``), and a counter
behind it refuses the write: the request is answered 500
``counter_moved_back``, logged with the counter, the block it would have
handed out and the mark, and counted (the CounterMovedBack metric, which
CounterMovedBackAlarm watches). The check is a dictionary lookup before the
write and one update after it.

A mark is read before its write is sent and raised after the write answers,
so only writes DynamoDB applied before this one count: threads of one
environment taking from one counter at once (the dev server runs handlers on
threads) never refuse each other. A keyed request's replay and an answer
from an idempotency record repeat an earlier request's block on purpose:
neither is checked nor raises the mark.

What the check cannot see; the clients' own check (a Sequence refuses a
block that overlaps IDs it handed out) and ``idblocks recover`` (moving a
restored counter above every ID handed out) are the other layers:

- an environment that never took from the counter: a new one, one restored
  from a SnapStart snapshot, one that forgot the counter (below), and every
  environment of the other function (next and batch are two functions, with
  environments and marks of their own). It has no mark, and hands out from
  the counter as it finds it;
- a move back that stays above this environment's mark: when other
  environments took IDs beyond it before the restore, only they refuse;
- an item deleted by hand: the counter no longer exists (404
  ``counter_not_found``); with AutoCreateCounters it is created afresh and
  the allocation that follows is refused here;
- the IDs of a block held for cached next: they were taken before the move
  and are this environment's alone. Its block expires within a minute; the
  next one is a write, and is checked.

Bounded: at most MARKED_COUNTERS counters are remembered, and the one least
recently taken from is forgotten first. Forgetting is safe: a forgotten
counter is checked as a new environment checks it, and a mark refuses
nothing but a counter that moved back. Ten thousand marks are about 2.5 MB
(a name of up to 128 characters and an integer each); an environment busy
with more counters than that within its life is rare, and keeps its marks of
the ten thousand it took from last.

The marks are empty at init, so a SnapStart snapshot holds none, and
``forget_all_taken_marks`` (the after-restore hook in core.py) empties them
should that ever change, as it drops cached blocks: what the snapshot's
memory took belongs to no restored copy in particular. A forked child keeps
its parent's marks: the IDs they cover were taken from the counter, which
only moves forward past them, so the child refuses nothing but a move back.
"""

from __future__ import annotations

import threading
import weakref

# The most counters one environment remembers a mark for (see above).
MARKED_COUNTERS = 10_000

# Every set of marks of the process, so a restored snapshot can empty them.
_ALL_MARKS: weakref.WeakSet[TakenMarks] = weakref.WeakSet()


class TakenMarks:
    """Per counter name, the highest ID this environment has taken."""

    def __init__(self, limit: int = MARKED_COUNTERS) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self._limit = limit
        # Insertion order is recency: took() moves a name to the end.
        self._marks: dict[str, int] = {}
        self._lock = threading.Lock()
        _ALL_MARKS.add(self)

    def __len__(self) -> int:
        return len(self._marks)

    def mark(self, name: str) -> int | None:
        """The highest ID taken from ``name`` here; None if none is remembered."""
        return self._marks.get(name)

    def took(self, name: str, last_id: int) -> None:
        """A fresh block of ``name`` ending at ``last_id`` was taken here."""
        with self._lock:
            marks = self._marks
            mark = marks.pop(name, None)
            # Threads' writes answer in any order: the mark only rises.
            marks[name] = last_id if mark is None or last_id > mark else mark
            if len(marks) > self._limit:
                del marks[next(iter(marks))]

    def forget(self) -> None:
        with self._lock:
            self._marks.clear()


def forget_all_taken_marks() -> None:
    """Empty every set of marks of the process (after a SnapStart restore)."""
    for marks in list(_ALL_MARKS):
        marks.forget()
