"""Cached next: the policy by which one function environment answers
``next`` from a block of IDs it took earlier, as a sequence with CACHE N does.

Pure: no Lambda, HTTP or DynamoDB here. The policy is handed a ``reserve``
callable that takes a block of a counter in one write, a ``keep`` callable
that asks the counter whether a block's write is still its last, and a
clock. It decides when a block is taken, how big, how long it may be
served, and hands the IDs out one by one, each exactly once.

How big. About what this environment serves of the counter in half a
block's life, as the last block showed it: the IDs it served, over the
time from its write to the request that found it used up (or expired). The
first block of a counter is one ID, and each block is at most _GROWTH times
the one before, so a burst of two requests does not take a thousand IDs; a
busy environment still reaches a thousand by its third block. Half a
life, not a whole one: at a steady rate a block then drains well before it
expires, and what expires unused is the rate's wobble, not half a block.

The counter's ``cache`` setting is the most a block may hold: ``reserve``
asks for ``count`` IDs, and the store's write is refused where the setting
is smaller (CacheBelowCount, naming the setting), so the policy asks again
for the setting; each write tells the setting it saw (``Block.cache``), and
the policy asks for no more than that from then on. The environment never
reads the item to learn it, and a PUT of ``cache`` is obeyed from the next
block on. Near ``max`` the write is refused (fewer IDs are left than
asked); the refusal says how many are left, and the policy asks for exactly
those, so every ID up to ``max`` is still handed out. With cache 1 a block
is one ID, served at once and never kept: a write per ID.

How long. A block is served for at most ``block_lifetime_seconds`` after
its write began (the clock is read before ``reserve`` is called, so the
bound holds whatever the write's latency). This is what bounds how long a
PUT (new next, max or cache) or a DELETE takes to be seen by every
environment: an environment never hands out an ID from a block more than
that after the counter last showed it nothing had changed. A block that
expires with IDs left is kept only if the counter says that its write is
still the last one (``keep``: no allocation since, so the high-water mark
is still the block's end, and no admin write, each of which removes the
write's token): then nothing it would have missed has happened, and the
block is served for another lifetime from that check. Otherwise its IDs
are dropped, never served: a gap, not a duplicate. Nothing moves back
either way.

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

from idblocks_core.domain.errors import CacheBelowCount, CounterExhausted, ServiceUnavailable
from idblocks_core.domain.model import Block

# The longest a cached block is served after its write began (or after the
# counter last confirmed that write was still its last): the bound on how
# long a PUT or DELETE of a counter may go unseen by a warm environment. A
# minute keeps a block that drains slowly from costing more than about one
# write per minute per environment, and is a delay an operator can wait out.
BLOCK_LIFETIME_SECONDS = 60.0

# A block is sized to last about this share of its life at the rate the
# last one was served at.
_SIZED_FOR_SHARE_OF_LIFE = 0.5

# The most a block may grow over the one before: a short burst in a quiet
# environment takes 32 IDs, and a busy one takes 1, 32, then a thousand.
# Eightfold took five blocks to a thousand, and a thousand environments
# starting at once on one counter spent four seconds of its item's write
# budget growing (bench/scale.py).
_GROWTH = 32

# A block asked for can be refused (the cache setting is smaller, or fewer
# IDs are left) and asked for again smaller; a few rounds cover any
# realistic race with other environments and admins before the refusal
# goes to the caller.
_SHRINK_ROUNDS = 4

# Requests for different counters do not wait for each other's writes; a
# fixed set of locks keeps the memory per counter to its block alone.
_LOCK_STRIPES = 64

# reserve(name, count) takes one block of counter ``name`` in one write:
# ``count`` IDs, refused with CacheBelowCount where the counter's cache
# setting is smaller, and with CounterExhausted (with ``left``) where it has
# fewer left.
Reserve = Callable[[str, int], Block]
# keep(name, end, token): whether the write that carried ``token`` and took
# IDs up to ``end`` is still counter ``name``'s last write.
Keep = Callable[[str, int, str], bool]


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
class _Held:
    """A counter's last block in this environment, used up or not, and what
    sizes the next one."""

    next: int
    end: int
    step: int
    expires_at: float
    written_at: float  # when the block's write began
    size: int  # the IDs it had
    token: str | None  # what its write carried (None: it cannot be kept)
    cache: int | None  # the counter's cache setting as the last write saw it

    @property
    def left(self) -> int:
        return 0 if self.next > self.end else (self.end - self.next) // self.step + 1


# Every policy of the process, so a forked child can drop what its parent held.
_POLICIES: weakref.WeakSet[NextCache] = weakref.WeakSet()


class NextCache:
    def __init__(
        self,
        reserve: Reserve,
        keep: Keep,
        *,
        clock: Callable[[], float] = time.monotonic,
        block_lifetime_seconds: float = BLOCK_LIFETIME_SECONDS,
    ) -> None:
        if not block_lifetime_seconds > 0:
            raise ValueError(f"block_lifetime_seconds must be positive, not {block_lifetime_seconds}")
        self._reserve = reserve
        self._keep = keep
        self._clock = clock
        self._lifetime = block_lifetime_seconds
        self._start_empty()
        _POLICIES.add(self)

    def _start_empty(self) -> None:
        self._blocks: dict[str, _Held] = {}
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        self._last_sweep = self._clock()

    def next_id(self, name: str) -> Served:
        """The next ID of counter ``name`` for this environment: from the
        block held in memory while it lasts (or is kept), else from a new
        block."""
        self._sweep_now_and_then()
        with self._locks[hash(name) % _LOCK_STRIPES]:
            # Read after the lock: a wait behind another request's write
            # must not stretch a block's life.
            now = self._clock()
            held = self._blocks.get(name)
            if (
                held is not None
                and held.next <= held.end
                and (now < held.expires_at or self._kept(name, held))
            ):
                served = held.next
                held.next += held.step
                return Served(served)
            written_from = self._clock()
            block = self._take(name, self._size_after(held, now))
            self._blocks[name] = _Held(
                block.start + block.step,
                block.end,
                block.step,
                written_from + self._lifetime,
                written_from,
                block.count,
                block.token,
                block.cache if block.cache is not None else (held.cache if held else None),
            )
            return Served(block.start, block)

    def held(self, name: str) -> int:
        """How many IDs of ``name`` this environment holds unserved (expired
        or not): what a recycled environment would leave as a gap."""
        with self._locks[hash(name) % _LOCK_STRIPES]:
            held = self._blocks.get(name)
            return 0 if held is None else held.left

    def forget(self) -> None:
        """Drop every held block: their IDs become a gap."""
        for lock in self._locks:
            lock.acquire()
        try:
            self._blocks.clear()
        finally:
            for lock in self._locks:
                lock.release()

    def _kept(self, name: str, held: _Held) -> bool:
        """Whether an expired block with IDs left may be served on: its write
        is still the counter's last. The new life counts from before the
        question is sent, as a block's from before its write."""
        if held.token is None:
            return False
        asked_at = self._clock()
        if not self._keep(name, held.end, held.token):
            return False
        held.expires_at = asked_at + self._lifetime
        return True

    def _size_after(self, held: _Held | None, now: float) -> int:
        """The next block's size: about what the last one served per second,
        for half a life; one ID when there was none; never more than
        _GROWTH times the last, nor than the cache setting last seen."""
        if held is None:
            return 1
        size = held.size * _GROWTH
        elapsed = now - held.written_at
        if elapsed > 0:
            served = held.size - held.left
            size = max(1, min(size, round(served * _SIZED_FOR_SHARE_OF_LIFE * self._lifetime / elapsed)))
        return size if held.cache is None else min(size, held.cache)

    def _take(self, name: str, count: int) -> Block:
        for round_ in range(_SHRINK_ROUNDS):
            last_round = round_ == _SHRINK_ROUNDS - 1
            try:
                return self._reserve(name, count)
            except CacheBelowCount as smaller:
                if last_round:
                    # Admins and other environments outran every round: the
                    # caller's next try finds the counter settled.
                    raise ServiceUnavailable(
                        f"counter '{name}' changed while a block was taken; try again"
                    ) from None
                # Refused again, the setting changed again since the last
                # refusal named it: one ID, which no setting refuses.
                count = smaller.cache if round_ == 0 else 1
            except CounterExhausted as refused:
                if refused.left == 0:
                    # The caller asked for one ID, not for a block: say so.
                    raise CounterExhausted(name, 1, refused.next_id, refused.max_id, refused.step) from None
                if last_round or refused.left >= count:
                    raise
                count = refused.left
        raise AssertionError("unreachable: the last round returns or raises")  # pragma: no cover

    def _sweep_now_and_then(self) -> None:
        """Drop the blocks of counters no longer asked for, once a lifetime:
        those that expired more than a lifetime ago (one that expired
        since may still be kept), so memory holds only what may still serve
        or size a block."""
        now = self._clock()
        if now - self._last_sweep < self._lifetime:
            return
        self._last_sweep = now
        for name, held in list(self._blocks.items()):
            if now < held.expires_at + self._lifetime:
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
