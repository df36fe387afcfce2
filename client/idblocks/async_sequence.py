"""AsyncSequence: Sequence for asyncio. IDs of one counter, handed out from
memory, without ever blocking the event loop.

    async with AsyncSequence(AsyncHttpBackend(url), "orders") as orders:
        order_id = await orders.next_id()
        line_ids = await orders.take(20)

It keeps Sequence's promises (client/README.md) and runs Sequence's policy
(idblocks.policy): the same block sizes, prefetch point, request that keeps
its count and Idempotency-Key until answered, and errors. What differs is
only how it waits and how a request goes on the network:

- A block request runs in a task the AsyncSequence owns, not in a caller,
  and no caller awaits that task: each waits on a future of its own, which
  the task sets when its answer is settled. So a caller cancelled, or timed
  out by ``asyncio.timeout``, while it waits (whether or not it made the
  request) only stops waiting; the request goes on, as if shielded. The task
  settles its answer itself: a block that lands is held whoever still waits,
  and a request without an answer stays pending, key and count, for whoever
  asks next (or the prefetcher).
- When a block lands, only as many waiting callers are woken as it has IDs
  for, first come first woken, WAKE_BATCH of them per turn of the loop; the
  others wait on, and the next request goes out at once for them. (Waking
  every waiter at every block, as Sequence's notify_all does, stalled the
  loop for tens of milliseconds with a thousand tasks waiting.)
- The prefetcher is that same task, started ahead when the prefetch mark is
  passed; there is no thread.
- No caller owns a request, so no caller is told ServiceUnavailable because
  "its" request failed: every caller waiting for a block asks again within
  ``wait_timeout``, and each request is bounded by the backend's retry policy.
  Errors retrying cannot fix reach every waiting caller as their own type.

One AsyncSequence serves the tasks of one event loop at a time (one per
process and loop: a worker's lifespan, say); it is not for threads.

IDs and ranges increase per task, as Sequence's do per thread: the event loop
runs one task at a time, and each step hands out from the lowest IDs held.
A caller is told CounterExhausted (or any final error) only when nothing held
can serve it: before a failure is raised, what is held is looked at again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from idblocks.backend import Block
from idblocks.errors import SequenceClosed, ServiceUnavailable
from idblocks.policy import (
    CLOSE_ATTEMPTS,
    CLOSE_TIMEOUT,
    DEFAULT_MAX_BATCH,
    BlockHolder,
    _fresh,
    _Request,
)

# How many waiting callers are woken in one turn of the event loop.
WAKE_BATCH = 32


class AsyncBackend(Protocol):
    """What an AsyncSequence needs: one coroutine that hands out a block."""

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block: ...


class AsyncSequence(BlockHolder):
    def __init__(
        self,
        backend: AsyncBackend,
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
        """The arguments are Sequence's, with the same meaning. Making one
        does no I/O and needs no running loop; the first block is asked for
        by the first call (or ``await seq.start()``)."""
        self._configure(
            backend,
            counter,
            prefetch=prefetch,
            block_size=block_size,
            initial_block=initial_block,
            min_block=min_block,
            max_block=max_block,
            runway=runway,
            max_runway=max_runway,
            prefetch_at=prefetch_at,
            wait_timeout=wait_timeout,
            max_batch=max_batch,
            clock=clock,
        )
        self.backend: AsyncBackend = backend
        self._reset()
        _live.add(self)

    def _reset(self) -> None:
        """Hold nothing: at the start, and in a forked child."""
        self._hold_nothing()
        # The one block request on the network, owned by this sequence.
        self._request_task: asyncio.Task[None] | None = None
        # Callers waiting for a block, first come first: what each needs,
        # and the future that wakes it.
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    # -- handing out -------------------------------------------------------------

    async def next_id(self) -> int:
        """The next ID, above every ID and range this task got before.
        Waits (never blocking the loop) only when every fetched ID is used up."""
        try:
            return next(self._ids)
        except StopIteration:
            return await self._next_id_slow()

    async def _next_id_slow(self) -> int:
        deadline = time.monotonic() + self.wait_timeout
        seen = self._answers
        while True:
            try:
                return next(self._ids)
            except StopIteration:
                pass
            self._check_open()
            if not self._next_segment():
                await self._await_block(1, deadline, seen)

    async def take(self, n: int) -> range:
        """``n`` consecutive IDs, as a range, above every ID this task had
        before; as Sequence.take (IDs held below a block fetched for it are
        skipped and counted in ``unused_ids``). ``n`` up to ``max_batch``;
        more raises ValueError before anything is asked of the service."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        if n > self.max_batch:
            raise ValueError(f"n must be at most max_batch ({self.max_batch}), not {n}")
        self._take_hint = n
        deadline = time.monotonic() + self.wait_timeout
        seen = self._answers
        while True:
            self._check_open()
            taken = self._take_from_held(n)
            if taken is not None:
                return taken
            await self._await_block(n, deadline, seen)

    async def start(self) -> None:
        """Ask for the first block now (e.g. in an app's start-up), without
        waiting for it."""
        self._check_open()
        if self._request_task is None and not self._ready:
            self._send_pending(1)

    # -- waiting -------------------------------------------------------------------

    async def _await_block(self, need: int, deadline: float, seen: int) -> None:
        """One wait for a block of at least ``need``: the caller, having found
        nothing held that serves it, calls this, then looks again.

        Raises a failure retrying cannot fix, answered since the caller began
        (``seen``): the caller has just found nothing held that serves it, and
        nothing ran in between, so exhaustion is told last. Else makes sure a
        request is on the network and waits to be woken: a cancelled caller
        leaves the request running. ServiceUnavailable at ``deadline``."""
        failure = self._failure if self._answers != seen else None
        if failure is not None and failure.final_for(need):
            raise _fresh(failure.error)
        if self._request_task is None:
            if failure is not None and time.monotonic() >= deadline:
                raise ServiceUnavailable(
                    f"no block for '{self.counter}' within {self.wait_timeout} s"
                ) from failure.error
            self._send_pending(need)
        woken = asyncio.get_running_loop().create_future()
        self._waiters.append((need, woken))
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                await woken
        except TimeoutError:
            raise ServiceUnavailable(f"no block for '{self.counter}' within {self.wait_timeout} s") from None

    def _check_open(self) -> None:
        if self._closed:
            raise SequenceClosed(f"AsyncSequence('{self.counter}') is closed")

    # -- the network -----------------------------------------------------------------

    def _request_prefetch(self) -> None:
        if not self.prefetch or self._closed or self._ready or self._request_task is not None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # handed out outside a loop (a test's setup): the next wait fetches
            return
        self._send_pending(1)

    def _send_pending(self, need: int) -> None:
        """Put the pending request (or a new one for at least ``need`` IDs) on
        the network, in a task of this sequence's."""
        request = self._pending or self._new_request(need)
        self._request_task = asyncio.get_running_loop().create_task(
            self._send(request), name=f"idblocks-{self.counter}"
        )

    async def _send(self, request: _Request) -> None:
        """Send ``request`` once and settle its answer, for whoever waits.
        Never raises: how it failed is kept in ``_failure``."""
        started = time.monotonic()
        try:
            outcome: Block | BaseException = await self.backend.allocate(
                self.counter, request.size, idempotency_key=request.key
            )
        except Exception as exc:  # noqa: BLE001 - settled below
            outcome = exc
        except BaseException:
            # Cancelled (nothing here cancels it; the loop going away does),
            # or the process is being interrupted: the request stays
            # pending, unanswered, as after a lost answer, and whoever waits
            # asks again.
            if self._request_task is asyncio.current_task():
                self._request_task = None
                self._wake(everyone=True)
            raise
        if self._request_task is asyncio.current_task():
            self._request_task = None
        else:
            return  # a forked child's copy of its parent's request: not ours to settle
        self._answers += 1
        landed = False
        # A smaller request after a size refusal is made by the callers
        # still waiting, each for its own need; so is a retry.
        with contextlib.suppress(Exception):  # kept in _failure for the callers that wait
            landed = self._settle(request, outcome, time.monotonic() - started, 0)
        if not landed:
            self._wake(everyone=True)  # each decides: its error, or ask again
            return
        if self._wake(everyone=False) and not self._closed:
            self._send_pending(1)  # for those the block cannot serve

    def _wake(self, *, everyone: bool) -> bool:
        """Wake the waiting callers: every one, or, first come first, as many
        as the IDs held can serve. True if some are left waiting."""
        held = len(self._left_in_segment()) + len(self._rest or ()) + sum(map(len, self._ready))
        wanted = sum(need for need, woken in self._waiters if not woken.done())
        self._wake_some(None if everyone else held)
        return not everyone and wanted > held

    def _wake_some(self, held: int | None) -> None:
        """Wake up to WAKE_BATCH callers (all of them if ``held`` is None,
        else while ``held`` lasts), and the next batch at the loop's next
        turn: callers woken in one turn run in one turn, and a thousand of
        them held the loop for tens of milliseconds."""
        batch = 0
        while self._waiters and (held is None or held > 0):
            if batch == WAKE_BATCH:
                asyncio.get_running_loop().call_soon(self._wake_some, held)
                return
            need, woken = self._waiters.popleft()
            if not woken.done():  # else cancelled, or timed out
                woken.set_result(None)
                batch += 1
                if held is not None:
                    held -= need
        # Cancelled waiters left behind are dropped as they reach the front.
        while self._waiters and self._waiters[0][1].done():
            self._waiters.popleft()

    # -- lifecycle -----------------------------------------------------------------

    async def aclose(self, timeout: float = CLOSE_TIMEOUT) -> int:
        """As Sequence.close(): stop prefetching, hand out nothing more, and
        return (and keep in ``unused_ids``) how many IDs of the blocks taken
        were never handed out. A request on the network is waited for up to
        ``timeout``; one whose answer was lost is asked again with its key,
        up to CLOSE_ATTEMPTS times while ``timeout`` lasts. A block landing
        later still adds to ``unused_ids``."""
        if self._closed:
            return self.unused_ids or 0
        self._closed = True
        self._wake(everyone=True)  # to hear that it is closed
        deadline = time.monotonic() + timeout
        if self._request_task is not None and timeout > 0:
            # asyncio.wait shields it: a cancelled aclose() leaves the request running.
            await asyncio.wait({self._request_task}, timeout=timeout)
        for attempt in range(CLOSE_ATTEMPTS):
            if timeout <= 0 or self._request_task is not None or self._pending is None:
                break
            if attempt and time.monotonic() >= deadline:
                break
            self._send_pending(1)  # the pending request, key and count
            assert self._request_task is not None
            await asyncio.wait({self._request_task}, timeout=max(0.0, deadline - time.monotonic()))
        return self._count_unused()

    def _after_fork_in_child(self) -> None:
        """The blocks, the request and its task belong to the parent: let
        them go; keys are drawn afresh here."""
        closed = self._closed
        self._reset()
        self._closed = closed

    def __del__(self) -> None:
        if not hasattr(self, "_request_task") or self._closed:
            return
        self._closed = True
        unused = self._count_unused()
        if not sys.is_finalizing():
            warnings.warn(
                f"AsyncSequence('{self.counter}') was never closed; {unused} IDs went unused",
                ResourceWarning,
                stacklevel=1,
            )

    async def __aenter__(self) -> AsyncSequence:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncSequence({self.counter!r}, requests={self.requests}, closed={self._closed})"


# Every AsyncSequence in the process, so that a forked child drops what its
# parent holds before anything in it can draw from it.
_live: weakref.WeakSet[AsyncSequence] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for seq in list(_live):
        seq._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
