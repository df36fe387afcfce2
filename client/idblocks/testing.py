"""In-memory backends for tests and benchmarks: one process, no network,
with latency and faults to inject. They keep the service's contract: blocks
are consecutive and never overlap, and a request repeated with the same
Idempotency-Key gets the same block back. MemoryBackend is for Sequence,
AsyncMemoryBackend for AsyncSequence."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from idblocks.block import Block
from idblocks.errors import CounterExhausted, InvalidRequest, ServiceUnavailable

# Fault kinds for MemoryBackend.fail_next
# Refused before anything was taken, as a throttled service refuses (503):
# the ServiceUnavailable counts one capacity refusal.
UNAVAILABLE = "unavailable"
# Refused for capacity once, retried by the backend and then answered: the
# block counts one capacity refusal, as HttpBackend's does after a 503.
THROTTLED = "throttled"
LOST_RESPONSE = "lost_response"  # the block was taken, the answer never arrived


class MemoryBackend:
    def __init__(
        self,
        *,
        latency: float = 0.0,
        start: int = 1,
        max_id: int = 2**53 - 1,
        max_batch: int = 1_000_000,
        step: int = 1,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``step`` > 1 hands out every step-th ID from ``start``, as one
        region of ``step`` does."""
        self.latency = latency
        self.step = step
        self.max_batch = max_batch
        self._sleep = sleep
        self._next = start
        self._max = max_id
        self._lock = threading.Lock()
        self._by_key: dict[str, tuple[int, Block]] = {}
        self._faults: collections.deque[str] = collections.deque()
        self.calls = 0  # allocate() calls, failed ones included
        self.blocks: list[Block] = []  # every block taken, in order

    def fail_next(self, times: int = 1, kind: str = UNAVAILABLE) -> None:
        if kind not in (UNAVAILABLE, THROTTLED, LOST_RESPONSE):
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            self._faults.extend([kind] * times)

    def clear_faults(self) -> None:
        """Drop the faults not injected yet."""
        with self._lock:
            self._faults.clear()

    def move_back(self, to: int) -> None:
        """The counter's state moves back, as a table restored from an
        earlier backup: its next ID is ``to`` again, so that IDs already
        handed out are handed out again (what a client must then refuse)."""
        with self._lock:
            self._next = to

    @property
    def handed_out(self) -> int:
        return sum(map(len, self.blocks))

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        if self.latency:
            self._sleep(self.latency)
        return self.answer(counter, count, idempotency_key=idempotency_key)

    def answer(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        """What the service does with one block request, at once: the next
        fault, else the block (the same one again for a key it has seen)."""
        with self._lock:
            self.calls += 1
            fault = self._faults.popleft() if self._faults else None
            if fault == UNAVAILABLE:
                raise ServiceUnavailable("injected: service unavailable", capacity_refusals=1)
            if not 1 <= count <= self.max_batch:
                raise InvalidRequest(
                    400, "invalid_count", f"count must be an integer from 1 to {self.max_batch}"
                )
            if idempotency_key in self._by_key:
                first_count, block = self._by_key[idempotency_key]
                if first_count != count:
                    raise InvalidRequest(422, "idempotency_key_reused", "key reused with a different count")
            else:
                last = self._next + (count - 1) * self.step
                if last > self._max:
                    raise CounterExhausted(409, "counter_exhausted", f"counter '{counter}' is exhausted")
                block = Block(self._next, last, self.step)
                self._next = last + self.step
                self._by_key[idempotency_key] = (count, block)
                self.blocks.append(block)
            if fault == LOST_RESPONSE:
                raise ServiceUnavailable("injected: the response was lost")
            if fault == THROTTLED:
                return dataclasses.replace(block, capacity_refusals=1)
            return block


class AsyncMemoryBackend:
    """MemoryBackend for AsyncSequence: the same counter, contract and faults
    (``fail_next``: unavailable, throttled, lost response), behind a
    coroutine whose ``latency`` is waited on the event loop, half before the
    block is taken and half after, as a request and its answer travel.

    ``cancelled`` counts the requests cancelled on the way: an AsyncSequence
    never lets a caller's cancellation reach its request, so it stays 0.
    ``blocking=True`` waits the latency with time.sleep instead: a backend
    that blocks the loop, to show what a loop-lag measurement catches."""

    def __init__(self, *, latency: float = 0.0, blocking: bool = False, **memory_options: Any) -> None:
        self.memory = MemoryBackend(**memory_options)
        self.latency = latency
        self.blocking = blocking
        self.cancelled = 0
        self.in_flight = 0  # requests on the way now

    def __getattr__(self, name: str) -> Any:
        # fail_next, calls, blocks, handed_out, step...: the counter's
        return getattr(self.memory, name)

    async def _travel(self) -> None:
        if not self.latency:
            await asyncio.sleep(0)  # a request always lets the loop run others
        elif self.blocking:
            time.sleep(self.latency / 2)
        else:
            await asyncio.sleep(self.latency / 2)

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.in_flight += 1
        try:
            await self._travel()
            block = self.memory.answer(counter, count, idempotency_key=idempotency_key)
            await self._travel()
            return block
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
