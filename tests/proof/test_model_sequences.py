"""Sequence and AsyncSequence against a model: Hypothesis writes random
programs of next_id, take, close, drain and cancel by several callers, over a
service that answers, loses answers, answers late, answers the wrong size,
says exhausted, refuses for capacity or asks to wait (Retry-After), whose
counter other clients take from and which moves back (restored from a
backup), while the clock moves on, threads doze, a thread draws with
next_id the moment a segment is put up (the lock-free path lets it, while
another thread holds the lock) and the process is restored from a snapshot
(Lambda SnapStart: the client's after-restore functions run); after every
step the invariants below are checked.

- No ID is handed out twice, and every ID handed out is of a block whose
  answer reached the sequence, of the size asked for, above every block
  that reached it before.
- A caller is told CounterMovedBack only after a block overlapping one
  delivered before reached the sequence; and once one has, no ID of a block
  delivered after it is handed out before a caller is told.
- After a restore, no ID the sequence held before it is handed out, no key
  sent before it is sent again, and no answer to a request made before it
  is taken (it is every restored copy's).
- Per caller (thread or task), every ID and range lies above what it got before.
- At most one block request is out at a time (besides those abandoned at a
  restore), and none before the end of the service's last Retry-After.
- No call fails (closed aside) while what is held could serve it; and
  CounterExhausted is told only when the service, since the call began,
  refused with fewer IDs left than the caller needs.
- No caller waits (awake) while what is held could serve it.
- Taken from the service = handed out + unused + taken but never answered
  to the sequence, where unused is what is held or passed over until a
  close has counted, and unused_ids from then on (every block landing later
  included); across any number of close calls, timed out, concurrent or
  cancelled. Every close returns unused_ids as it is when it returns.
- No block request brings what the sequence has not handed out of what it
  was given (held, passed over by take, dropped at a restore) above what
  it has handed out (the start bound, while it applies: after the first
  block, and until a capacity refusal), beyond min_block or a take(n)
  waiting; the last take(n) asks for more only as far as the bound allows.
- Every caller ends (served, timed out, told of a failure, or closed), and
  after the last close, what was never answered is only the request that
  close gave up on.

Time is a fake clock for threads and a virtual event loop for tasks: a test
never depends on the machine's speed. A step ends when nothing more can
happen without the next one (every thread at rest; the loop idle). ``make
test`` runs a modest number of programs; ``make soak`` many more
(IDBLOCKS_MODEL_EXAMPLES). A failure names the seed that reproduces it:
IDBLOCKS_MODEL_SEED=<seed>.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import queue
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import seed as use_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from idblocks import (
    AsyncSequence,
    CounterExhausted,
    CounterMovedBack,
    Sequence,
    SequenceClosed,
    ServiceError,
    ServiceUnavailable,
    UnexpectedResponse,
)
from tests.support.sequence_model import (
    ANSWER,
    OUTCOMES,
    REFUSE,
    RETRY_AFTER,
    DozingCondition,
    FakeClock,
    TaskService,
    ThreadService,
    VirtualLoop,
    wait_for,
)
from tests.support.snapstart import restore

EXAMPLES = int(os.environ.get("IDBLOCKS_MODEL_EXAMPLES") or 100)
SEED = int(os.environ.get("IDBLOCKS_MODEL_SEED") or random.SystemRandom().randrange(2**32))
CALLERS = 3
MAX_BATCH = 200

# What a caller may hear, besides its IDs: a failure the service or the
# network caused, exhaustion, or that the sequence is closed.
EXPECTED = (ServiceUnavailable, CounterExhausted, SequenceClosed, UnexpectedResponse, ServiceError)

# Calls and the IDs they ask for, and the service's decisions, weighted so
# that a program hands out IDs for a while before its first close.
OPERATIONS = st.sampled_from(
    [("next", 1)] * 12
    + [("take", n) for n in (1, 2, 3, 7, 20, 60, MAX_BATCH)]
    + [("close", timeout) for timeout in (0.0, 1.0, 30.0, math.inf)]
)
DECISIONS = st.sampled_from([ANSWER] * (len(OUTCOMES) - 1) + list(OUTCOMES))
# How many IDs the counter has left from now on: unchanged, a few (it runs
# out), or plenty again (an admin raised its max).
ROOM = st.sampled_from([None] * 6 + [0, 3, 15, 10**9])
SLOTS = st.integers(0, CALLERS - 1)


class Caller:
    """One caller's history: the highest ID it got, and the call it is in."""

    def __init__(self) -> None:
        self.highest = 0
        self.busy: tuple[str, int | float] | None = None
        self.refusals_before = 0  # how many exhaustions the service had answered when the call began


def opened(machine: SequenceModel) -> bool:
    return machine.seq is not None


class SequenceModel(RuleBasedStateMachine):
    """The program and its invariants; a driver (threads or tasks) runs it.
    Whether a rule applies never depends on how the threads ran (a rule
    that does not apply does nothing), so a program replays as drawn."""

    service: Any
    seq: Any

    def __init__(self) -> None:
        super().__init__()
        self.callers = [Caller() for _ in range(CALLERS)]
        self.handed: set[int] = set()
        self.held_at_restores: set[int] = set()  # IDs the sequence held when restored
        self.problems: list[str] = []
        self.seq = None
        # What a block request may ask for beyond the bound: the largest
        # take(n) seen waiting since a block last landed (a take that made
        # a request waits for it, until a step decides it).
        self.hint = 0
        # The highest ID the model's own racing thread drew (ThreadModel).
        self.raced = 0
        self.landed = 0
        self.refused = False  # a capacity refusal lifts the start bound

    # -- what a driver provides ------------------------------------------------------

    def open(self, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def start(self, slot: int, kind: str, amount: int | float) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    def consistent(self) -> Any:
        """A context in which the sequence's state can be read as a whole."""
        return nullcontext()

    def asleep(self, slot: int) -> bool:
        """Whether a caller is left not running (a dozing thread)."""
        return False

    def invoke(self, kind: str, amount: Any, close: Callable[..., Any]) -> Any:
        """The call (a coroutine, for tasks); ``close``: close or aclose."""
        if kind == "next":
            return self.seq.next_id()
        if kind == "take":
            return self.seq.take(amount)
        return close(timeout=amount)

    # -- the program ---------------------------------------------------------------------

    @initialize(
        block_size=st.sampled_from([None, 1, 3, 10]),
        initial_block=st.sampled_from([2, 10, 50]),
        prefetch=st.booleans(),
        prefetch_at=st.sampled_from([0.0, 0.5, 0.9]),
        wait_timeout=st.sampled_from([30.0, math.inf]),
    )
    def begin(self, **options: Any) -> None:
        self.open(dict(options, max_block=100, max_batch=MAX_BATCH))

    @precondition(opened)
    @rule(slot=SLOTS, operation=OPERATIONS)
    def call(self, slot: int, operation: tuple[str, int | float]) -> None:
        caller = self.callers[slot]
        if caller.busy is None:
            caller.busy = operation
            caller.refusals_before = len(self.service.refusals)
            self.start(slot, *operation)
            self.settle()

    @precondition(opened)
    @rule(outcome=DECISIONS, retry_after=st.sampled_from([0.5, 5.0, 100.0]), room=ROOM)
    def decide(self, outcome: str, retry_after: float, room: int | None) -> None:
        if self.service.waiting:
            self.refused |= outcome in (REFUSE, RETRY_AFTER)
            self.service.decide(outcome, retry_after=retry_after, room=room)
            self.settle()

    @precondition(opened)
    @rule(seconds=st.sampled_from([0.1, 1.0, 10.0, 100.0]))
    def time_passes(self, seconds: float) -> None:
        self.advance(seconds)

    @precondition(opened)
    @rule(now=st.sampled_from([True, False, False, False]))  # less often than the others
    def restore(self, now: bool) -> None:
        """The process is one restored from a snapshot taken now: what the
        sequence holds, and every key it sent, are the snapshot's."""
        if not now:
            return
        with self.consistent():
            self.held_at_restores |= self.service.ids_delivered() - self.handed
            self.service.restored()
            restore()
        self.settle()

    @precondition(opened)
    @rule(count=st.sampled_from([1, 5, 30]))
    def others_take(self, count: int) -> None:
        """Another client of the counter takes IDs."""
        self.service.others_take(count)

    @precondition(opened)
    @rule(by=st.sampled_from([1, 10, 100]), now=st.sampled_from([True, False, False]))
    def move_back(self, by: int, now: bool) -> None:
        """The counter moves back (less often than the others), as a table
        restored from an earlier backup does."""
        if now:
            self.service.move_back(by)

    @precondition(opened)
    @rule()
    def drain(self) -> None:
        """The process is about to stop: it drains (from the test's own
        thread, as a signal handler would), and goes on serving."""
        self.seq.drain()
        self.settle()

    # -- what a call returned, or raised ---------------------------------------------------

    def record(self, slot: int, kind: str, amount: int | float, result: Any) -> None:
        """Checked as the call ends, before any other caller of the loop runs
        (under the lock, for threads); then the caller is free again."""
        caller = self.callers[slot]
        caller.busy = None
        if isinstance(result, BaseException):
            need = 1 if kind == "next" else amount
            told = not isinstance(result, (SequenceClosed, asyncio.CancelledError))
            if isinstance(result, CounterMovedBack):
                if not self.service.moved_back:
                    self.problems.append(f"caller {slot} was told {result!r}, and no block overlapped one")
                self.service.told_moved_back()
            if told and kind != "close" and self.seq._can_serve(need):  # white-box
                self.problems.append(f"caller {slot} was told {result!r} with IDs held that serve it")
            elif isinstance(result, CounterExhausted) and not any(
                left < need for left in self.service.refusals[caller.refusals_before :]
            ):
                self.problems.append(f"caller {slot} was told {result!r}, but the counter had {need} left")
            elif not isinstance(result, (*EXPECTED, asyncio.CancelledError)):
                self.problems.append(f"caller {slot}'s {kind} raised {result!r}")
            return
        if kind == "close":
            if result != self.seq.unused_ids:
                self.problems.append(f"close returned {result}, with unused_ids {self.seq.unused_ids}")
            return
        ids = [result] if kind == "next" else list(result)
        if len(ids) != amount:
            self.problems.append(f"{kind}({amount}) gave {len(ids)} IDs")
        if ids[0] <= caller.highest:
            self.problems.append(f"caller {slot} got {ids[0]} after {caller.highest}")
        self.hand_out(ids)
        caller.highest = ids[-1]

    def hand_out(self, ids: list[int]) -> None:
        """What every ID handed out must be (the lock held, for threads)."""
        repeated = self.handed.intersection(ids)
        if repeated:
            self.problems.append(f"IDs handed out twice: {sorted(repeated)[:5]}")
        snapshots = self.held_at_restores.intersection(ids)
        if snapshots:
            self.problems.append(f"IDs held at a restore handed out after it: {sorted(snapshots)[:5]}")
        untold = self.service.after_untold.intersection(ids)
        if untold:
            moved = sorted(untold)[:5]
            self.problems.append(
                f"IDs {moved} of a block after the counter moved back, before a caller was told"
            )
        self.handed.update(ids)

    # -- after every step --------------------------------------------------------------------

    @invariant()
    def nothing_went_wrong(self) -> None:
        assert not self.problems, self.problems
        if self.seq is not None:
            assert not self.service.problems, self.service.problems

    @invariant()
    def the_books_balance(self) -> None:
        if self.seq is None:
            return
        service, seq = self.service, self.seq
        with self.consistent():
            assert service.out() <= 1, "more than one block request out at a time"
            # Until a close has counted, what is held and passed over (white-box);
            # from then on unused_ids says it all, blocks landing since included.
            counted = seq.unused_ids is not None
            unused = seq.unused_ids if counted else seq._held() + seq._skipped
            never_answered = sum(map(len, service.undelivered().values()))
            assert service.taken == len(self.handed) + unused + never_answered, (
                f"taken {service.taken} != handed out {len(self.handed)} + unused {unused} "
                f"+ never answered {never_answered}"
            )
            assert self.handed <= service.ids_delivered(), "an ID handed out of no block answered"

    @invariant()
    def no_block_request_brings_more_than_was_used(self) -> None:
        """Checked on the request waiting for an answer, whenever: since it
        was made nothing has landed and what is held has only shrunk, so
        what the bound allows now is at least what it allowed then."""
        if self.seq is None:
            return
        with self.consistent():
            sizer = self.seq.sizer  # white-box: the IDs of the blocks that landed
            waiting = max((int(c.busy[1]) for c in self.callers if c.busy and c.busy[0] == "take"), default=0)
            if sizer.taken != self.landed:
                # A block landed: the next request is for the takes waiting
                # now (cancelled later or not), or those waiting later.
                self.landed, self.hint = sizer.taken, waiting
            self.hint = max(self.hint, waiting)
            if self.seq._closed or self.refused or not sizer.taken:
                return
            # Of the IDs of the blocks that landed, those not handed out
            # (held, passed over, dropped at a restore) are at most those
            # handed out: used - (taken - used).
            used = len(self.handed)
            allowed = max(sizer.minimum, 2 * used - sizer.taken, self.hint, waiting)
            for request in self.service.waiting:
                assert request.count <= allowed, (
                    f"a request for {request.count} IDs, with {sizer.taken} taken and {used} handed out"
                )

    @invariant()
    def no_caller_waits_for_what_is_held(self) -> None:
        if self.seq is None:
            return
        with self.consistent():
            if self.seq._closed:
                return
            for slot, caller in enumerate(self.callers):
                if caller.busy is None or caller.busy[0] == "close" or self.asleep(slot):
                    continue
                need = caller.busy[1] if caller.busy[0] == "take" else 1
                assert not self.seq._can_serve(need), f"caller {slot} waits for {need} with them held"

    def wake_all(self) -> None:
        """Every caller left not running runs again."""

    def stop(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        if self.seq is None:
            return
        try:
            self.wake_all()
            self.finish()
        finally:
            self.stop()

    def finish(self) -> None:
        """Every request answered, time moved past every wait, and a last
        close: every caller ends, the books balance with nothing held, and
        only the request the close gave up on (if any) went unanswered."""
        for _ in range(20):
            while self.service.waiting:
                self.service.decide(ANSWER, room=10**9)
                self.settle()
            if not self.service.waiting and all(caller.busy is None for caller in self.callers):
                break
            if not any(caller.busy and caller.busy[0] == "close" for caller in self.callers):
                idle = [slot for slot, caller in enumerate(self.callers) if caller.busy is None]
                if idle:
                    self.call(idle[0], ("close", math.inf))
            self.advance(10**6)
        assert all(caller.busy is None for caller in self.callers), "a caller never ended"
        self.call(0, ("close", math.inf))
        self.nothing_went_wrong()
        self.the_books_balance()
        pending = self.seq._pending  # white-box: the request the last close gave up on, if any
        abandoned = self.service.stale  # at a restore: never to be asked for again
        assert set(self.service.undelivered()) - abandoned <= ({pending.key} if pending else set()), (
            "a block taken was never asked for again"
        )


# -- threads ----------------------------------------------------------------------------------


class ThreadModel(SequenceModel):
    """Sequence, each caller a thread. A step ends once every thread is at
    rest: waiting on the Sequence's condition, for the service's decision,
    or for its next call. A dozing thread sleeps through every notify until
    roused."""

    @initialize(racing=st.sampled_from([0, 1, 3]))
    def race(self, racing: int) -> None:
        """How many IDs a thread of the model's own draws, with next_id, each
        time a segment is put up: the lock-free path lets another thread
        draw the moment it is, whatever the thread holding the lock goes on
        to do before it lets go. It leaves one at least: a thread that drew
        every ID the moment it came would starve the others for ever, as no
        scheduler does."""
        self.racing = racing

    def open(self, options: dict[str, Any]) -> None:
        self.clock = FakeClock()
        self.service = ThreadService(MAX_BATCH, self.clock)
        self.seq = Sequence(self.service, "c", clock=self.clock, **options)
        activate = self.seq._activate  # white-box: where a segment is put up

        def activate_and_race(segment: range) -> None:
            activate(segment)
            racing = min(getattr(self, "racing", 0), len(segment) - 1)
            drawn = list(itertools.islice(self.seq._ids, max(racing, 0)))
            if not drawn:
                return
            if drawn[0] <= self.raced:
                self.problems.append(f"the racing thread got {drawn[0]} after {self.raced}")
            self.raced = drawn[-1]
            self.hand_out(drawn)

        self.seq._activate = activate_and_race
        self.condition = DozingCondition(self.seq._lock)
        self.seq._signal.changed = self.seq._changed = self.condition  # white-box
        self.jobs: list[queue.SimpleQueue[tuple[str, int | float] | None]] = []
        self.threads = []
        for slot in range(CALLERS):
            jobs: queue.SimpleQueue[tuple[str, int | float] | None] = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(slot, jobs), daemon=True)
            thread.start()
            self.jobs.append(jobs)
            self.threads.append(thread)

    def _serve(self, slot: int, jobs: queue.SimpleQueue[tuple[str, int | float] | None]) -> None:
        while (job := jobs.get()) is not None:
            kind, amount = job
            try:
                result: Any = self.invoke(kind, amount, self.seq.close)
            except BaseException as exc:  # noqa: BLE001 - recorded, checked
                result = exc
            with self.seq._lock:
                self.record(slot, kind, amount, result)

    def start(self, slot: int, kind: str, amount: int | float) -> None:
        self.jobs[slot].put((kind, amount))

    def _at_rest(self) -> bool:
        seq = self.seq
        prefetcher = seq._prefetcher is not None and seq._prefetcher.is_alive()
        # A caller's own request goes out on a thread of its own (white-box: by its name).
        fetching = sum(thread.name == "idblocks-c-fetch" for thread in threading.enumerate())
        busy = sum(caller.busy is not None for caller in self.callers) + prefetcher + fetching
        return busy == len(self.condition._waiters) + len(self.service.waiting)  # white-box

    def settle(self) -> None:
        wait_for(self._at_rest, "the threads did not come to rest (one spins, or waits for nothing)")

    def _notify(self) -> None:
        with self.condition:
            self.condition.notify_all()

    def advance(self, seconds: float) -> None:
        self.clock.now += seconds
        self._notify()  # the waits are on real time: look at the fake one again
        self.settle()

    def consistent(self) -> Any:
        return self.seq._lock

    def asleep(self, slot: int) -> bool:
        return self.threads[slot] in self.condition.dozing

    @precondition(opened)
    @rule(slot=SLOTS)
    def doze(self, slot: int) -> None:
        self.condition.dozing.add(self.threads[slot])

    @precondition(opened)
    @rule(slot=SLOTS)
    def rouse(self, slot: int) -> None:
        if self.threads[slot] in self.condition.dozing:
            self.condition.dozing.discard(self.threads[slot])
            self._notify()
            self.settle()

    def wake_all(self) -> None:
        self.condition.dozing.clear()
        self._notify()
        self.settle()

    def stop(self) -> None:
        """Whatever failed: no thread is left waiting on anything."""
        self.service.close_down()
        self.clock.now += 10**9
        self.seq.close(timeout=0)
        for jobs in self.jobs:
            jobs.put(None)
        for thread in self.threads:
            thread.join(timeout=10)


# -- tasks --------------------------------------------------------------------------------------


class TaskModel(SequenceModel):
    """AsyncSequence, each call a task on a loop of virtual time. A step ends
    once nothing can run before the time moves on. Calls may be cancelled."""

    def open(self, options: dict[str, Any]) -> None:
        self.loop = VirtualLoop()
        self.service = TaskService(MAX_BATCH, self.loop.time)
        self.seq = AsyncSequence(self.service, "c", clock=self.loop.time, **options)
        self.tasks: dict[int, asyncio.Task[None]] = {}

    async def _call(self, slot: int, kind: str, amount: int | float) -> None:
        try:
            result: Any = await self.invoke(kind, amount, self.seq.aclose)
        except BaseException as exc:  # noqa: BLE001 - recorded, checked
            result = exc
        self.record(slot, kind, amount, result)

    def start(self, slot: int, kind: str, amount: int | float) -> None:
        self.tasks[slot] = self.loop.create_task(self._call(slot, kind, amount))

    def settle(self) -> None:
        self.loop.settle()

    def advance(self, seconds: float) -> None:
        self.loop.advance(seconds)

    @precondition(opened)
    @rule(slot=SLOTS)
    def cancel(self, slot: int) -> None:
        task = self.tasks.get(slot)
        if task is not None and not task.done():
            task.cancel()
            self.settle()

    def stop(self) -> None:
        self.service.close_down()
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


# -- the tests ------------------------------------------------------------------------------------


@contextmanager
def seed_named_on_failure() -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        exc.add_note(f"model seed {SEED}: IDBLOCKS_MODEL_SEED={SEED} reruns these programs")
        raise


@pytest.mark.parametrize("model", [ThreadModel, TaskModel], ids=["Sequence", "AsyncSequence"])
def test_a_sequence_keeps_its_promises_whatever_the_program(model, long_run):
    checks = settings(
        max_examples=EXAMPLES * (20 if long_run else 1),
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )
    with seed_named_on_failure():
        run_state_machine_as_test(use_seed(SEED)(model), settings=checks)
