"""What the model-based tests of Sequence and AsyncSequence run on: a
scripted service whose every block request waits for the test to decide its
outcome, a fake clock for threads, and an event loop on virtual time for
tasks, so that nothing depends on the machine's speed.

The service keeps the real one's contract: a block is taken once per key and
handed back the same to the same key, and it is refused only for what the
counter really lacks. What it does wrong on purpose, it does as a real
network or service could: lose an answer, answer late (the request waits
until the test decides), answer with the wrong size, refuse for capacity,
ask to wait (Retry-After), or answer what cannot be read. What an operator
can do wrong, it does too: its counter moves back (``move_back``, a table
restored from a backup), and hands out again IDs it handed out before.
After a restore from a snapshot (``restored``), every key it has seen is the
snapshot's: one arriving again is a problem, and an answer to a request made
before it does not reach the sequence, which abandoned the request."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from idblocks import CounterExhausted, InvalidRequest, ServiceUnavailable, UnexpectedResponse
from idblocks.block import Block

# Outcomes the test decides for the oldest request waiting for one.
ANSWER = "answer"
LOSE = "lose"  # taken, the answer lost
WRONG_SIZE = "wrong_size"  # taken, with another count than asked
REFUSE = "refuse"  # throttled: not taken (503, counted as a capacity refusal)
RETRY_AFTER = "retry_after"  # not taken, and asked to wait (503 with Retry-After)
GARBLED = "garbled"  # taken, answered with a body that cannot be read
OUTCOMES = (ANSWER, LOSE, WRONG_SIZE, REFUSE, RETRY_AFTER, GARBLED)

# However long a request waits for the test's decision, in real seconds: a
# request still waiting this long was left by a test that forgot it.
FORGOTTEN = 60.0


@dataclasses.dataclass
class Waiting:
    """A block request waiting for the test's decision."""

    count: int
    key: str
    deliver: Callable[[Block | BaseException], None]


class ScriptedService:
    """One counter. ``taken``: IDs the service took (blocks made, each once);
    ``applied``: key -> its block; ``delivered``: keys whose block reached
    the client; ``refusable``: of those, the keys of blocks the client must
    not hand out (the wrong size, or overlapping a block delivered before);
    ``waiting``: requests waiting for a decision, oldest first."""

    def __init__(self, max_batch: int, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.not_before = -math.inf  # no request before: the last Retry-After's end
        self.problems: list[str] = []
        self.next = 1
        self.max_id = 10**9
        self.max_batch = max_batch
        self.applied: dict[str, Block] = {}
        self.delivered: set[str] = set()
        self.refusable: set[str] = set()
        self.highest = 0  # the highest ID of the blocks delivered
        # Blocks delivered overlapping one delivered before: the counter
        # had moved back. ``untold``: since the last of them, no caller has
        # been told; ``after_untold``: the IDs of blocks delivered since.
        self.moved_back = 0
        self.untold = False
        self.after_untold: set[int] = set()
        self.waiting: list[Waiting] = []
        self.seen: set[str] = set()  # every key that arrived
        self.stale: set[str] = set()  # the keys seen before the last restore
        # How many IDs the counter had left at each exhaustion it answered.
        self.refusals: list[int] = []
        self.lock = threading.Lock()
        self.shut = False  # the test is over: every request is refused at once

    @property
    def taken(self) -> int:
        return sum(map(len, self.applied.values()))

    def undelivered(self) -> dict[str, Block]:
        """Blocks taken whose answer never reached the client."""
        return {key: block for key, block in self.applied.items() if key not in self.delivered}

    def ids_delivered(self) -> set[int]:
        """The IDs of the blocks delivered that the client may hand out."""
        return {i for key in self.delivered - self.refusable for i in self.applied[key].ids()}

    def others_take(self, count: int) -> None:
        """Another client takes ``count`` IDs: the next block does not
        continue the last."""
        with self.lock:
            self.next += count

    def move_back(self, by: int) -> None:
        """The counter moves back ``by`` IDs (not below 1), as a table
        restored from an earlier backup: it hands out again IDs it handed out."""
        with self.lock:
            self.next = max(1, self.next - by)

    def told_moved_back(self) -> None:
        """A caller was told that the counter moved back."""
        self.untold = False
        self.after_untold.clear()

    def _deliver(self, request: Waiting, block: Block) -> None:
        """``block`` reaches the client, unless the request was abandoned."""
        if request.key not in self.stale:  # else abandoned: the sequence drops the answer
            self.delivered.add(request.key)
            if len(block) != request.count:
                self.refusable.add(request.key)
            if block.start <= self.highest:
                self.refusable.add(request.key)
                self.moved_back += 1
                self.untold = True
            elif self.untold:
                self.after_untold.update(block.ids())
            self.highest = max(self.highest, block.end)
        request.deliver(block)

    def out(self) -> int:
        """How many block requests made since the last restore wait for a decision."""
        return sum(request.key not in self.stale for request in self.waiting)

    def restored(self) -> None:
        """The client was restored from a snapshot: the keys it sent so far
        are the snapshot's, and so is the Retry-After it was told (the
        restored environment starts later, in a time of its own)."""
        self.stale |= self.seen
        self.not_before = -math.inf

    def arrive(self, request: Waiting) -> None:
        """A block request arrives: it waits for the test's decision."""
        if request.key in self.stale:
            self.problems.append(f"key {request.key}, sent before a restore, was sent again after it")
        self.seen.add(request.key)
        if self.shut:
            request.deliver(ServiceUnavailable("the test is over"))
            return
        if self.clock() < self.not_before:
            self.problems.append(
                f"a block request came at {self.clock():g} s, before the Retry-After's end"
                f" at {self.not_before:g} s"
            )
        self.waiting.append(request)

    def _take(self, key: str, count: int, wrong: bool) -> Block | BaseException:
        """The block for ``key``: the one taken before, or a new one of
        ``count`` (with ``wrong``, of another size), or exhaustion if the
        counter has fewer than ``count`` left: refused for what it lacks."""
        if key in self.applied:
            return self.applied[key]
        left = self.max_id - self.next + 1
        if count > left:
            self.refusals.append(left)
            return CounterExhausted(409, "counter_exhausted", "the counter is exhausted")
        size = count
        if wrong:  # one more if there is room, else one fewer; one ID with no room: no wrong size
            size = count + 1 if count < left else max(count - 1, 1)
        block = Block(self.next, self.next + size - 1)
        self.next += size
        self.applied[key] = block
        return block

    def close_down(self) -> None:
        """The test is over: every request waiting, and every one to come, is refused."""
        with self.lock:
            self.shut = True
            waiting, self.waiting = self.waiting, []
        for request in waiting:
            request.deliver(ServiceUnavailable("the test is over"))

    def decide(self, outcome: str, *, retry_after: float = 1.0, room: int | None = None) -> None:
        """The oldest waiting request gets ``outcome``. ``room``: before it,
        the counter's max is set to leave that many IDs (exhaustion, or an
        admin raising the max again)."""
        with self.lock:
            request = self.waiting.pop(0)
            if room is not None:
                self.max_id = self.next - 1 + room
        if not 1 <= request.count <= self.max_batch:
            request.deliver(InvalidRequest(400, "invalid_count", f"count must be 1 to {self.max_batch}"))
            return
        if outcome in (REFUSE, RETRY_AFTER):
            wait = retry_after if outcome == RETRY_AFTER else None
            if wait is not None and request.key not in self.stale:  # else the sequence drops it
                self.not_before = self.clock() + wait
            request.deliver(ServiceUnavailable("refused", capacity_refusals=1, retry_after=wait))
            return
        result = self._take(request.key, request.count, wrong=outcome == WRONG_SIZE)
        if isinstance(result, BaseException):
            request.deliver(result)
        elif outcome == LOSE:
            request.deliver(ServiceUnavailable("the answer was lost (the request may have been applied)"))
        elif outcome == GARBLED:
            request.deliver(UnexpectedResponse("POST /counters/c/batch answered a body that is not JSON"))
        else:
            self._deliver(request, result)


class ThreadService(ScriptedService):
    """For Sequence: ``allocate`` blocks its thread until the test decides.
    A thread whose request is in ``waiting`` is at rest; once decided, it
    runs (it lands what it got) until it waits somewhere else."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        got: list[Block | BaseException] = []
        decided = threading.Event()

        def deliver(result: Block | BaseException) -> None:
            got.append(result)
            decided.set()

        with self.lock:
            self.arrive(Waiting(count, idempotency_key, deliver))
        if not decided.wait(FORGOTTEN):
            with self.lock:
                self.problems.append("a block request was never decided")
            raise ServiceUnavailable("a block request was never decided")
        (result,) = got
        if isinstance(result, BaseException):
            raise result
        return result


class TaskService(ScriptedService):
    """For AsyncSequence: ``allocate`` awaits the test's decision."""

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        decided: asyncio.Future[Block | BaseException] = asyncio.get_running_loop().create_future()

        def deliver(result: Block | BaseException) -> None:
            if not decided.done():
                decided.set_result(result)

        request = Waiting(count, idempotency_key, deliver)
        self.arrive(request)
        try:
            result = await decided
        except asyncio.CancelledError:
            if request in self.waiting:
                self.waiting.remove(request)
            raise
        if isinstance(result, BaseException):
            raise result
        return result


class FakeClock:
    """Seconds that pass only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: ``settle()`` runs everything that can
    run now, ``advance(seconds)`` moves the time on (timers due fire).
    Nothing waits on the machine's clock."""

    # More turns than this without going idle: something spins.
    TURNS = 100_000

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self._idle = False
        self._turns = 0
        real_select = self._selector.select

        def select(timeout: float | None = None) -> Any:
            self._turns += 1
            if timeout is None or timeout > 0 or self._turns > self.TURNS:
                self._idle = timeout is None or timeout > 0
                self.stop()  # nothing can run before the time moves on: this turn is the last
            return real_select(0)

        self._selector.select = select  # type: ignore[method-assign]

    def time(self) -> float:
        return self.now

    def settle(self) -> None:
        self._idle, self._turns = False, 0
        self.run_forever()
        if not self._idle:
            raise AssertionError(f"the event loop never went idle in {self.TURNS} turns: something spins")

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.settle()


class DozingCondition(threading.Condition):
    """A Sequence's condition, except that a thread in ``dozing``, once it
    waits, sleeps through every notify until it is taken out of ``dozing``:
    as a thread the scheduler leaves waiting while the others run on."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.dozing: set[threading.Thread] = set()

    def wait(self, timeout: float | None = None) -> bool:
        if threading.current_thread() not in self.dozing:
            return super().wait(timeout)
        while threading.current_thread() in self.dozing:
            super().wait()
        return True


def wait_for(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Until ``condition()`` holds three times in a row (the threads are at
    rest), or fail saying ``what`` did not happen."""
    deadline = time.monotonic() + limit
    in_a_row = 0
    while in_a_row < 3:
        in_a_row = in_a_row + 1 if condition() else 0
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {limit} s (real time)")
        time.sleep(0.0002)
