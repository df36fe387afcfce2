"""Cached next: the policy by which one function environment answers
``next`` from a block of IDs it took earlier, as a sequence with CACHE N does.

Pure: no Lambda, HTTP or DynamoDB here. The policy is handed a ``reserve``
callable that takes a block of a counter in one write, and a clock. It
decides when a block is taken, how big, how long it may be served, and hands
the IDs out one by one, each exactly once.

How big. ``reserve(name, None)`` asks for a block of the counter's own
``cache`` setting: the store does that in the write itself (the item carries
cache * step, which the conditional write adds), so the environment needs no
read before the write, and learns no setting it would have to keep fresh: a
PUT of ``cache`` is obeyed from the next block on. Near ``max`` that write is
refused (fewer than ``cache`` IDs are left); the refusal says how many are
left, and the policy asks for exactly those (``reserve(name, left)``), so
every ID up to ``max`` is still handed out. With cache 1 a block is one ID,
served at once and never kept: the write-per-ID behaviour of an uncached
counter.

How long. A block is served for at most ``block_lifetime_seconds`` after
its write began (the clock is read before ``reserve`` is called, so the
bound holds whatever the write's latency). This is what bounds how long a
PUT (new next, max or cache) or a DELETE takes to be seen by every
environment: an environment never hands out an ID from a block older than
that. IDs of an expired block are dropped, never served: a gap, not a
duplicate.

Exactly once. Every counter's block is read and advanced under a lock (the
dev server runs handlers on threads; Lambda sends one request at a time per
environment, where the lock costs nothing). Requests for one counter wait
for the write of a block rather than each taking one. A fork copies memory:
a child that served its parent's cached IDs would hand each out twice, so a
child starts with no blocks at all (``os.register_at_fork``), and
``forget_all_cached_blocks`` clears every policy for a restored snapshot.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from idblocks_core.domain.errors import CounterExhausted
from idblocks_core.domain.model import Block

# The longest a cached block is served after its write began: the bound on
# how long a PUT or DELETE of a counter may go unseen by a warm environment.
# A minute keeps a block that drains slowly from costing more than about one
# write per minute per environment, and is a delay an operator can wait out.
BLOCK_LIFETIME_SECONDS = 60.0

# A shrunken block can be refused again when other environments take what
# was left first; each round sees fewer IDs left, and a few rounds cover any
# realistic race before the refusal goes to the caller.
_SHRINK_ROUNDS = 4

# Requests for different counters do not wait for each other's writes; a
# fixed set of locks keeps the memory per counter to its block alone.
_LOCK_STRIPES = 64

# reserve(name, count) takes one block of counter ``name`` in one write:
# ``count`` IDs, or the counter's own cache setting when ``count`` is None.
# It raises CounterExhausted (with ``left``) when the counter has fewer.
Reserve = Callable[[str, int | None], Block]


@dataclass(frozen=True)
class Served:
    """One ID ``next`` hands out, and the block written for it, if any
    (None: served from a block held in memory, without a write)."""

    id: int
    taken: Block | None = None

    @property
    def from_memory(self) -> bool:
        return self.taken is None


@dataclass
class _HeldBlock:
    next: int
    end: int
    step: int
    expires_at: float


# Every policy of the process, so a forked child can drop what its parent held.
_POLICIES: weakref.WeakSet[NextCache] = weakref.WeakSet()


class NextCache:
    def __init__(
        self,
        reserve: Reserve,
        *,
        clock: Callable[[], float] = time.monotonic,
        block_lifetime_seconds: float = BLOCK_LIFETIME_SECONDS,
    ) -> None:
        if not block_lifetime_seconds > 0:
            raise ValueError(f"block_lifetime_seconds must be positive, not {block_lifetime_seconds}")
        self._reserve = reserve
        self._clock = clock
        self._lifetime = block_lifetime_seconds
        self._start_empty()
        _POLICIES.add(self)

    def _start_empty(self) -> None:
        self._blocks: dict[str, _HeldBlock] = {}
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        self._last_sweep = self._clock()

    def next_id(self, name: str) -> Served:
        """The next ID of counter ``name`` for this environment: from the
        block held in memory while it lasts, else from a new block."""
        self._sweep_now_and_then()
        with self._locks[hash(name) % _LOCK_STRIPES]:
            # Read after the lock: a wait behind another request's write
            # must not stretch a block's life.
            now = self._clock()
            held = self._blocks.get(name)
            if held is not None and now < held.expires_at:
                served = held.next
                held.next += held.step
                if held.next > held.end:
                    del self._blocks[name]
                return Served(served)
            self._blocks.pop(name, None)
            written_from = self._clock()
            block = self._take(name)
            if block.end > block.start:
                self._blocks[name] = _HeldBlock(
                    block.start + block.step, block.end, block.step, written_from + self._lifetime
                )
            return Served(block.start, block)

    def held(self, name: str) -> int:
        """How many IDs of ``name`` this environment holds unserved (expired
        or not): what a recycled environment would leave as a gap."""
        with self._locks[hash(name) % _LOCK_STRIPES]:
            held = self._blocks.get(name)
            return 0 if held is None else (held.end - held.next) // held.step + 1

    def forget(self) -> None:
        """Drop every held block: their IDs become a gap."""
        for lock in self._locks:
            lock.acquire()
        try:
            self._blocks.clear()
        finally:
            for lock in self._locks:
                lock.release()

    def _take(self, name: str) -> Block:
        count: int | None = None
        for round_ in range(_SHRINK_ROUNDS):
            try:
                return self._reserve(name, count)
            except CounterExhausted as refused:
                if refused.left == 0:
                    # The caller asked for one ID, not for a block: say so.
                    raise CounterExhausted(name, 1, refused.next_id, refused.max_id, refused.step) from None
                if round_ == _SHRINK_ROUNDS - 1 or (count is not None and refused.left >= count):
                    raise
                count = refused.left
        raise AssertionError("unreachable: the last round returns or raises")  # pragma: no cover

    def _sweep_now_and_then(self) -> None:
        """Drop the expired blocks of counters no longer asked for, once a
        lifetime, so memory holds only blocks that can still be served."""
        now = self._clock()
        if now - self._last_sweep < self._lifetime:
            return
        self._last_sweep = now
        for name, held in list(self._blocks.items()):
            if now < held.expires_at:
                continue
            lock = self._locks[hash(name) % _LOCK_STRIPES]
            # A busy stripe is serving or taking a block: it cleans up itself.
            if lock.acquire(blocking=False):
                try:
                    if self._blocks.get(name) is held:
                        del self._blocks[name]
                finally:
                    lock.release()


def forget_all_cached_blocks() -> None:
    """Drop every policy's blocks: memory copied into another process (a
    fork, a restored snapshot) must not hand out the IDs its origin holds."""
    for policy in list(_POLICIES):
        policy._start_empty()


# The locks are replaced too: a thread of the parent may have held one at
# the fork, and no thread of the child would ever release it.
os.register_at_fork(after_in_child=forget_all_cached_blocks)
