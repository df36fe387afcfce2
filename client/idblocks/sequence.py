"""Sequence: IDs of one counter, handed out from memory.

The IDs come in blocks (POST /counters/{name}/batch) and are served by a
plain iterator over the current block. Where the interpreter has a GIL,
``next()`` on a range iterator is one C call that advances the iterator before
anything can switch threads, so ``next_id`` needs no lock: two threads never
get the same ID. Builds without a GIL (free-threaded) take a lock instead.

Each block is served in two segments. When the first runs out, the next block
is requested in the background (prefetch), so in steady state the network is
never waited on. When the second runs out, the already-fetched block takes
over. Only these boundaries take the lock, and no lock is held while a
request is on the network.

Blocks are requested one at a time, and a block request, once made, is
repeated with the same count and Idempotency-Key until the service answers
it; so a lost response costs no IDs, and every block is above the one before.
IDs are handed out in block order, which is why they increase on each thread.

A thread that needs a block does not send the request itself: it goes out
on a thread of its own (or the prefetcher's), and the caller waits for it no
longer than ``wait_timeout``, however long the backend's retries take. A
request still out when its caller gives up goes on, and the block it brings
is held for whoever asks next.

Block sizes adapt: each is sized to last ``runway`` seconds at the measured
rate, within [min_block, max_block]; a busy client makes few requests, an
idle one holds few unused IDs. A block request the service refused for
capacity (the counter is hot) lengthens the runway, up to ``max_runway``.

A process forked from one holding a Sequence starts it afresh: it drops the
blocks, the request and the prefetcher it inherited (the parent still owns
them) and fetches its own blocks, with keys drawn in the child. So does an
environment restored from a Lambda SnapStart snapshot (idblocks.snapstart),
where the threads live on: a request on the network at the snapshot is
abandoned, and its answer dropped.

What is decided here, and not how it waits, lives in idblocks.policy, which
AsyncSequence shares: this module is the threads' driver of it.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
import threading
import time
import weakref
from types import TracebackType

from idblocks import snapstart
from idblocks.block import Backend, Block

# The policy both drivers share, importable from here as it always was.
from idblocks.policy import CLOSE_ATTEMPTS, CLOSE_TIMEOUT, BlockHolder, check_seconds
from idblocks.sizing import DEFAULT_MAX_BATCH, MAX_RUNWAY, BlockSizer, prefetch_tail, smoothed_latency

__all__ = [
    "CLOSE_ATTEMPTS",
    "CLOSE_TIMEOUT",
    "DEFAULT_MAX_BATCH",
    "MAX_RUNWAY",
    "BlockSizer",
    "Sequence",
    "gil_enabled",
    "prefetch_tail",
    "smoothed_latency",
]

# The longest fork() waits for block requests on the network to finish.
FORK_WAIT = CLOSE_TIMEOUT


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


class _Signal:
    """What the prefetcher thread shares with its Sequence. The thread holds
    this and a weak reference to the Sequence, never the Sequence itself, so
    a Sequence nobody uses any more is collected and its thread ends."""

    def __init__(self) -> None:
        # Reentrant: a Sequence collected on a thread that holds its lock
        # (the cyclic collector runs anywhere) closes itself under that lock.
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.want = False  # a block should be fetched ahead
        self.stop = False


class _Fetch:
    """A block request a caller waits for, sent on a thread of its own:
    ``done`` once it is settled, ``error`` what it failed with, for that
    caller."""

    def __init__(self, need: int) -> None:
        self.need = need
        self.done = False
        self.error: BaseException | None = None


def _fetch_for_caller(seq: Sequence, fetch: _Fetch) -> None:
    # The thread holds the Sequence only while its request is out. Its caller
    # is woken with the other waiting threads when the answer comes (_fetch
    # notifies them), and finds it done: the lock is let go only then.
    with seq._lock:
        try:
            if seq._caller_fetch is fetch:  # not abandoned at a restore before it began
                seq._fetch(fetch.need)
        except BaseException as exc:  # noqa: BLE001 - told to the caller, if it still waits
            fetch.error = exc
            seq._unheard(exc)  # else to the next caller: this one may have stopped waiting
        finally:
            fetch.done = True
            if seq._caller_fetch is fetch:
                seq._caller_fetch = None


def _prefetch_loop(sequence: weakref.ReferenceType[Sequence], signal: _Signal) -> None:
    while True:
        with signal.changed:
            while not (signal.want or signal.stop):
                signal.changed.wait()
            if signal.stop:
                return
            signal.want = False
        seq = sequence()
        if seq is None:
            return
        seq._prefetch_once()
        del seq  # dropped outside the lock: collecting it takes the lock


class Sequence(BlockHolder[Backend]):
    """IDs of one counter from ``backend`` (an HttpBackend, FailoverBackend
    or MemoryBackend), handed out from memory to any number of threads:
    ``next_id()``, ``take(n)``, ``close()``. The arguments are BlockHolder's."""

    def _opened(self) -> None:
        if not gil_enabled():
            # Ignored method-assign: on a free-threaded build each instance takes the locked variant.
            self.next_id = self._next_id_locked  # type: ignore[method-assign]
        with _live_lock:
            _live.add(self)

    def _reset(self) -> None:
        """Hold nothing: at the start, and in a forked child."""
        self._signal = _Signal()
        self._lock = self._signal.lock
        self._changed = self._signal.changed
        self._prefetcher: threading.Thread | None = None
        self._closing = False  # a close() is at work
        self._start_afresh()

    def _start_afresh(self) -> None:
        """Hold nothing and have no request on the network: at the start, in
        a forked child, and after a restore, whose threads live on (one on
        the network then drops its answer: see _fetch)."""
        self._hold_nothing()
        self._fetching = False  # a thread has the pending request on the network
        self._caller_fetch: _Fetch | None = None  # a caller's request, handed to a thread of its own

    def _in_flight(self) -> bool:
        return self._fetching

    def _wait(self, seconds: float) -> None:
        """Let the lock go until notified, or for ``seconds`` (any number: the
        condition takes at most threading.TIMEOUT_MAX)."""
        self._changed.wait(min(seconds, threading.TIMEOUT_MAX))

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
            deadline = self.clock() + self.wait_timeout
            while True:
                try:
                    return next(self._ids)  # another thread moved on already
                except StopIteration:
                    self._advance(deadline)

    def take(self, n: int) -> range:
        """``n`` consecutive IDs, as a range, above every ID this thread had
        before. They come from what is held when it covers ``n``; else from a
        block of at least ``n`` (fetched if need be, while other threads go on
        drawing what is held), and the IDs still held below it are then
        skipped, counted in ``unused_ids``: handing them out afterwards would
        go backwards. ``n`` up to ``max_batch``; more raises ValueError before
        anything is asked of the service."""
        self._check_take(n)
        with self._lock:
            self._take_hint = n
            deadline = self.clock() + self.wait_timeout
            while True:
                self._check_open()
                taken = self._take_from_held(n)
                if taken is not None:
                    return taken
                self._await_block(n, deadline)  # the lock was let go: look again

    # -- block boundaries (always with the lock held) --------------------------

    def _advance(self, deadline: float) -> None:
        """The current segment is used up: move to the next one, fetching if
        nothing is buffered. Raises when nothing can be had."""
        self._check_open()
        if not self._next_segment():
            # The lock is let go meanwhile, and another thread may start the
            # block that comes: the caller looks at the iterator again first.
            self._await_block(1, deadline)

    def _request_prefetch(self) -> None:
        if not self.prefetch or self._closed or self._ready or self._fetching:
            return
        if self._untold is not None:  # told first to the next thread that needs a block
            return
        if self._prefetcher is None:
            self._prefetcher = threading.Thread(
                target=_prefetch_loop,
                args=(weakref.ref(self), self._signal),
                name=f"idblocks-{self.counter}",
                daemon=True,
            )
            self._prefetcher.start()
        self._signal.want = True
        self._changed.notify_all()

    def _await_block(self, need: int, deadline: float) -> None:
        """Return once a block is fetched, fetching it when no other thread
        is, or once what is held could serve this thread after all. Raises
        what failed for good while this thread waited, its own request's
        failure, or ServiceUnavailable at ``deadline`` (at once when the
        service asked to wait past it); but only when nothing held could
        serve it: exhaustion, or any failure, is told after the last ID this
        thread could be given. Lets the lock go meanwhile."""
        seen = self._answers
        while not (self._ready and (need == 1 or any(len(block) >= need for block in self._ready))):
            self._check_open()
            answered = self._answers != seen
            # While this thread slept, a block may have come, been started
            # by another thread and been followed by a refusal: the last
            # answer says nothing of what is held now.
            if answered and (self._failure is None or self._can_serve(need)):
                return  # look again
            error = self._failed_for(need, answered, deadline)
            if error is not None:
                raise error
            now = self.clock()
            if not self._fetching and self._resend_at() <= now:
                # Nobody is asking, or the last try failed in a way that
                # asking again may fix: this thread asks.
                if answered and now >= deadline:
                    assert self._failure is not None  # answered and not returned above: it failed
                    raise self._too_long() from self._failure.error
                # Its failure is told as soon as it comes, within its wait:
                # nothing held could serve this thread when it came (nor
                # since, with no answer), and no other block lands while
                # its own request is out.
                self._fetch_within(need, deadline)
                return
            if now >= deadline:
                raise self._too_long()
            # Until the block on the network lands, or until the service's Retry-After.
            self._wait((deadline if self._fetching else self._resend_at()) - now)

    # -- fetching ------------------------------------------------------------

    def _fetch(self, need: int, *, only_pending: bool = False) -> None:
        """Send the pending request (or a new one for at least ``need`` IDs)
        until a block lands in ``_ready``; raise how it failed otherwise.
        With ``only_pending``, just the pending request, once. Called with
        the lock held, which is let go while on the network."""
        while True:
            request = self._pending
            if request is None:
                if only_pending:
                    return
                request = self._new_request(need)
            self._fetching = True
            started = self.clock()
            self._lock.release()
            try:
                # Begun when its key was drawn: not sent if a restore came since.
                with snapstart.requests_begun_at(request.began):
                    outcome: Block | BaseException = self.backend.allocate(
                        self.counter, request.size, idempotency_key=request.key
                    )
            except BaseException as exc:  # noqa: BLE001 - settled below, under the lock
                outcome = exc
            finally:
                self._lock.acquire()
            if self._pending is not request:
                return  # abandoned at a restore: every restored copy got this answer
            self._fetching = False
            self._answers += 1
            self._changed.notify_all()
            if self._settle(request, outcome, self.clock() - started, 0 if only_pending else need):
                return

    def _fetch_within(self, need: int, deadline: float) -> None:
        """_fetch(need) on a thread of its own, waited for until ``deadline``:
        returns once it is settled (or abandoned at a restore), raises how it
        failed, or ServiceUnavailable at ``deadline``, while it goes on (a
        block it brings is held, for whoever asks next). Called with the
        lock held, which is let go while waiting."""
        fetch = _Fetch(need)
        self._caller_fetch = fetch
        self._fetching = True  # no other thread sends until it is settled
        try:
            threading.Thread(
                target=_fetch_for_caller,
                args=(self, fetch),
                name=f"idblocks-{self.counter}-fetch",
                daemon=True,
            ).start()
        except RuntimeError:  # no new thread at interpreter exit: the caller sends
            self._caller_fetch = None
            self._fetch(need)
            return
        while not fetch.done and self._caller_fetch is fetch:  # a restore abandons it
            now = self.clock()
            if now >= deadline:
                raise self._too_long()
            self._wait(deadline - now)
        # Told at once, unless a block came while this thread was slow to
        # wake (another thread asked again, and was answered).
        if fetch.error is not None and not self._can_serve(need):
            if fetch.error is self._untold:
                self._untold = None  # told now, to this caller
            raise fetch.error

    def _prefetch_once(self) -> None:
        with self._lock:
            if self._closed or self._ready or self._fetching or self._resend_at() > self.clock():
                return
            try:
                self._fetch(1)
            except Exception as exc:  # noqa: BLE001 - kept in _failure for the threads that wait
                self._unheard(exc)

    # -- lifecycle -----------------------------------------------------------

    def close(self, timeout: float = CLOSE_TIMEOUT) -> int:
        """Stop prefetching and hand out nothing more. Returns, and keeps in
        ``unused_ids``, how many IDs of the blocks taken were never handed
        out. A block request on the network is waited for up to ``timeout``
        seconds (inf: until it is answered); a block that lands later still
        adds to ``unused_ids``. A request whose answer was lost is asked
        again with its key (so it takes nothing new if it had been applied),
        up to CLOSE_ATTEMPTS times while ``timeout`` lasts, so that the
        block it took is counted too. Every close does so again: one that
        failed or ran out of time is finished by the next, and a close
        called while another is at work waits for it and returns the same
        count."""
        timeout = check_seconds(timeout, "timeout")
        with self._lock:
            self._closed = True
            self._signal.stop = True
            self._changed.notify_all()
            while self._closing:  # another thread's close: it counts for this one too
                self._wait(math.inf)
            self._closing = True
            try:
                deadline, asked = self.clock() + timeout, 0
                while (wait := self._next_on_close(asked, timeout, deadline)) is not None:
                    if wait > 0:
                        self._wait(wait)
                        continue
                    asked += 1
                    with contextlib.suppress(Exception):
                        self._fetch(1, only_pending=True)
                return self._count_unused()
            finally:
                self._closing = False
                self._changed.notify_all()

    def _after_fork_in_child(self) -> None:
        """The blocks, request and prefetcher belong to the parent: let them go."""
        closed = self._closed
        self._reset()
        self._closed = closed

    def __del__(self) -> None:
        signal = getattr(self, "_signal", None)
        if signal is None or self._closed:
            return
        with self._lock:
            self._closed = True
            signal.stop = True
            self._changed.notify_all()
            unused = self._count_unused()
        self._warn_unclosed(unused)

    def __enter__(self) -> Sequence:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


# -- every Sequence in the process: fork, restore and exit --------------------

_live: weakref.WeakSet[Sequence] = weakref.WeakSet()
_live_lock = threading.Lock()
_held_over_fork: list[Sequence] = []


def _before_fork() -> None:
    # No Sequence is mid-change when the process is copied, and the child
    # does not inherit a lock held by a thread it will not have. A block
    # request on the network is let finish first (for up to FORK_WAIT in
    # all), so that the backend is not copied in the middle of a request,
    # with its own locks held by a thread the child does not have.
    deadline = time.monotonic() + FORK_WAIT
    with _live_lock:  # not while another thread adds one
        sequences = list(_live)
    for seq in sequences:
        seq._lock.acquire()
        _held_over_fork.append(seq)
        while seq._fetching:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            seq._changed.wait(left)


def _after_fork_in_parent() -> None:
    while _held_over_fork:
        _held_over_fork.pop()._lock.release()


def _after_fork_in_child() -> None:
    while _held_over_fork:
        _held_over_fork.pop()._after_fork_in_child()


@snapstart.on_restore
def _after_restore() -> None:
    with _live_lock:
        sequences = list(_live)
    for seq in sequences:
        with seq._lock:
            seq._after_restore()
            seq._changed.notify_all()  # nothing is on the network now: waiting threads ask afresh


def _close_all_at_exit() -> None:
    # Without waiting on the network: the process is going away.
    for seq in list(_live):
        seq.close(timeout=0.0)


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)
atexit.register(_close_all_at_exit)
