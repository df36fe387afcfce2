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
  ``wait_timeout``, and each request is bounded by the backend's retry policy;
  none asks again before the time the service said to wait (Retry-After),
  and a caller whose wait_timeout ends before that time is told at once.
  Errors retrying cannot fix reach every waiting caller, each its own
  instance of the class raised.

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
import weakref
from types import TracebackType

from idblocks import snapstart
from idblocks.block import AsyncBackend, Block
from idblocks.policy import CLOSE_TIMEOUT, BlockHolder, _Request, check_seconds

__all__ = ["WAKE_BATCH", "AsyncBackend", "AsyncSequence"]

# How many waiting callers are woken in one turn of the event loop.
WAKE_BATCH = 32


class AsyncSequence(BlockHolder[AsyncBackend]):
    """Sequence for asyncio: IDs of one counter from ``backend`` (an
    AsyncHttpBackend, AsyncFailoverBackend or AsyncMemoryBackend), handed
    out from memory to any number of tasks: ``await next_id()``, ``await
    take(n)``, ``await aclose()``. The arguments are Sequence's, with the
    same meaning. Making one does no I/O and needs no running loop; the
    first block is asked for by the first call (or ``await seq.start()``)."""

    def _opened(self) -> None:
        _live.add(self)

    def _reset(self) -> None:
        """Hold nothing: at the start, and in a forked child."""
        self._start_afresh()
        # Callers waiting for a block, first come first: what each needs,
        # and the future that wakes it.
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        # The aclose() at work, if one is: done when it has counted.
        self._closing: asyncio.Future[None] | None = None

    def _start_afresh(self) -> None:
        """Hold nothing and have no request on the network: at the start, in
        a forked child, and after a restore (where the request's task, if
        its loop lives on, drops its answer: see _send)."""
        self._hold_nothing()
        # The one block request on the network, owned by this sequence.
        self._request_task: asyncio.Task[None] | None = None

    def _in_flight(self) -> bool:
        return self._request_task is not None

    # -- handing out -------------------------------------------------------------

    async def next_id(self) -> int:
        """The next ID, above every ID and range this task got before.
        Waits (never blocking the loop) only when every fetched ID is used up."""
        try:
            return next(self._ids)
        except StopIteration:
            return await self._next_id_slow()

    async def _next_id_slow(self) -> int:
        deadline = self.clock() + self.wait_timeout
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
        self._check_take(n)
        self._take_hint = n
        deadline = self.clock() + self.wait_timeout
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
        if self._request_task is None and not self._ready and self._resend_at() <= self.clock():
            self._send_pending(1)

    # -- waiting -------------------------------------------------------------------

    async def _await_block(self, need: int, deadline: float, seen: int) -> None:
        """One wait for a block of at least ``need``: the caller, having found
        nothing held that serves it, calls this, then looks again.

        Raises a failure retrying cannot fix, answered since the caller began
        (``seen``): the caller has just found nothing held that serves it, and
        nothing ran in between, so exhaustion is told last. Else makes sure a
        request is on the network (or is sent once the service's Retry-After
        has passed) and waits to be woken: a cancelled caller leaves the
        request running. ServiceUnavailable at ``deadline``, or at once when
        the service asked to wait past it."""
        answered = self._answers != seen
        error = self._failed_for(need, answered, deadline)
        if error is not None:
            raise error
        wake_at = deadline
        if self._request_task is None:
            now = self.clock()
            if answered and self._failure is not None and now >= deadline:
                raise self._too_long() from self._failure.error
            if self._resend_at() <= now:
                self._send_pending(need)
            else:
                wake_at = self._resend_at()  # then look again, and ask
        woken = asyncio.get_running_loop().create_future()
        self._waiters.append((need, woken))
        try:
            async with asyncio.timeout(max(wake_at - self.clock(), 0)):
                await woken
        except TimeoutError:
            if wake_at == deadline:
                raise self._too_long() from None

    # -- the network -----------------------------------------------------------------

    def _request_prefetch(self) -> None:
        if not self.prefetch or self._closed or self._ready or self._request_task is not None:
            return
        if self._untold is not None:  # told first to the next caller that needs a block
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # handed out outside a loop (a test's setup): the next wait fetches
            return
        if self._resend_at() <= self.clock():
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
        started = self.clock()
        try:
            # Begun when its key was drawn (this task may first run after a
            # restore): not sent if a restore came since.
            with snapstart.requests_begun_at(request.began):
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
            return  # a forked child's copy of its parent's request, or one abandoned at a restore
        self._answers += 1
        landed = False
        # A smaller request after a size refusal is made by the callers
        # still waiting, each for its own need; so is a retry.
        try:
            landed = self._settle(request, outcome, self.clock() - started, 0)
        except Exception as exc:  # noqa: BLE001 - kept in _failure for the callers that wait
            self._unheard(exc)
        if not landed:
            self._wake(everyone=True)  # each decides: its error, or ask again
            return
        need = self._wake(everyone=False)
        if need and not self._closed:
            self._send_pending(need)  # for those the block cannot serve, as big as the largest needs

    def _wake(self, *, everyone: bool) -> int:
        """Wake the waiting callers: every one, or, first come first, those
        the IDs held can serve (a caller needing more than is left is passed
        over, not waited behind). Returns how many IDs the next request
        should bring for those left waiting (the most any of them needs), 0
        if none is."""
        if everyone:
            self._wake_some(None)
            return 0
        held = left = self._held()
        unserved = 0
        for need, woken in self._waiters:
            if woken.done():
                continue
            if need <= left:
                left -= need
            else:
                unserved = max(unserved, need)
        self._wake_some(held)
        return unserved

    def _wake_some(self, held: int | None) -> None:
        """Wake up to WAKE_BATCH callers (all of them if ``held`` is None,
        else those whose need is left in ``held``, in turn), and the next
        batch at the loop's next turn: callers woken in one turn run in one
        turn, and a thousand of them held the loop for tens of milliseconds."""
        passed: list[tuple[int, asyncio.Future[None]]] = []
        batch = 0
        while self._waiters and (held is None or held > 0):
            need, woken = self._waiters.popleft()
            if woken.done():  # cancelled, or timed out
                continue
            if held is not None and need > held:
                passed.append((need, woken))  # waits for a bigger block
                continue
            if batch == WAKE_BATCH:
                self._waiters.appendleft((need, woken))
                woken.get_loop().call_soon(self._wake_some, held)  # the loop's, even from a restore hook
                break
            woken.set_result(None)
            batch += 1
            if held is not None:
                held -= need
        self._waiters.extendleft(reversed(passed))
        # Cancelled waiters left behind are dropped as they reach the front.
        while self._waiters and self._waiters[0][1].done():
            self._waiters.popleft()

    # -- lifecycle -----------------------------------------------------------------

    async def aclose(self, timeout: float = CLOSE_TIMEOUT) -> int:
        """As Sequence.close(): stop prefetching, hand out nothing more, and
        return (and keep in ``unused_ids``) how many IDs of the blocks taken
        were never handed out. A request on the network is waited for up to
        ``timeout`` (inf: until it is answered); one whose answer was lost is
        asked again with its key, up to CLOSE_ATTEMPTS times while
        ``timeout`` lasts. A block landing later still adds to
        ``unused_ids``. Every aclose does so again: one that was cancelled
        or ran out of time is finished by the next, and an aclose called
        while another is at work waits for it and returns the same count.
        Cancelling an aclose never cancels the block request it waits for."""
        timeout = check_seconds(timeout, "timeout")
        self._closed = True
        self._wake(everyone=True)  # to hear that it is closed
        while self._closing is not None:  # another aclose: it counts for this one too
            await asyncio.wait({self._closing})
        self._closing = asyncio.get_running_loop().create_future()
        try:
            deadline, asked = self.clock() + timeout, 0
            while (wait := self._next_on_close(asked, timeout, deadline)) is not None:
                if wait == 0:
                    asked += 1
                    self._send_pending(1)  # the pending request, key and count
                elif self._request_task is None:
                    await asyncio.sleep(wait)  # until the service's Retry-After
                else:
                    # asyncio.wait shields it: a cancelled aclose() leaves the request running.
                    await asyncio.wait({self._request_task}, timeout=wait)
            return self._count_unused()
        finally:
            self._closing.set_result(None)
            self._closing = None

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
        self._warn_unclosed(self._count_unused())

    async def __aenter__(self) -> AsyncSequence:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()


# Every AsyncSequence in the process, so that a forked child drops what its
# parent holds before anything in it can draw from it, and so does an
# environment restored from a snapshot.
_live: weakref.WeakSet[AsyncSequence] = weakref.WeakSet()


@snapstart.on_restore
def _after_restore() -> None:
    for seq in list(_live):
        seq._after_restore()
        # Nothing is on the network now: waiting callers ask afresh (none
        # waits on a loop that is closed).
        with contextlib.suppress(RuntimeError):
            seq._wake(everyone=True)


def _after_fork_in_child() -> None:
    for seq in list(_live):
        seq._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
