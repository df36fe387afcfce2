"""Several regional endpoints of one idblocks deployment set (RegionCount K,
one stack per region), used as one backend: blocks come from one region until
it is unavailable, then from the next.

Moving on is safe because each region hands out only its own residue modulo
K: a request that region A may have applied (its answer lost) and that region
B then answers costs the IDs of A's block (a gap), never a duplicate.

Order is per region: B's counter is not A's, so the first IDs from B can be
below the last from A. A Sequence's IDs then go down once on each thread and
increase again; the IDs of each region (its residue) increase throughout.
Keeping them increasing across the move would mean asking B for IDs above
A's, which the service has no request for.

    from idblocks import FailoverBackend, HttpBackend, IamAuth, Sequence

    backend = FailoverBackend.over(
        ["https://a1.execute-api.eu-west-1.amazonaws.com/v1", "https://b2.execute-api.us-east-1.amazonaws.com/v1"],
        auth=IamAuth(),
    )
    with Sequence(backend, "orders") as orders:
        order_id = orders.next_id()
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable
from dataclasses import replace
from typing import Any, Generic, TypeVar, cast

from idblocks.backend import HttpBackend
from idblocks.block import AsyncBackend, Backend, Block
from idblocks.errors import ServiceUnavailable

R = TypeVar("R")  # a region's backend: a Backend, or an AsyncBackend


class _Regions(Generic[R]):
    """The regions, in order, and which one requests go to first: what
    FailoverBackend and AsyncFailoverBackend share."""

    def __init__(self, backends: Iterable[R]) -> None:
        self.backends: list[R] = list(backends)
        if not self.backends:
            raise ValueError(f"{type(self).__name__} needs at least one backend")
        self._lock = threading.Lock()
        self._current = 0
        self.failovers = 0  # how often a request moved on to another region

    @property
    def current(self) -> R:
        with self._lock:
            return self.backends[self._current]

    def _tries(self) -> Generator[int, Block | ServiceUnavailable | None, Block]:
        """Which region to ask next (yielded: the driver sends back its block
        or its ServiceUnavailable), and what the request comes to: shared by
        FailoverBackend and AsyncFailoverBackend."""
        with self._lock:
            first = self._current
        failure: ServiceUnavailable | None = None
        # Capacity refusals of the regions tried first: the block (or the
        # failure) reports them all, so a Sequence learns that its load is
        # too much for the counters even when another region answered.
        refusals = 0
        # Whether no region has ever answered: then neither has the whole.
        never_answered = True
        for offset in range(len(self.backends)):
            index = (first + offset) % len(self.backends)
            outcome = yield index
            if isinstance(outcome, ServiceUnavailable):
                failure = outcome
                refusals += outcome.capacity_refusals
                never_answered = never_answered and outcome.never_answered
                continue
            assert isinstance(outcome, Block)
            block = outcome
            if offset:
                with self._lock:
                    # Later requests start where this one succeeded.
                    self._current = index
                    self.failovers += 1
            if refusals:
                block = replace(block, capacity_refusals=block.capacity_refusals + refusals)
            return block
        assert failure is not None  # the loop ran at least once and every pass failed
        raise ServiceUnavailable(
            f"every region is unavailable; the last said: {failure}",
            capacity_refusals=refusals,
            never_answered=never_answered,
        ) from failure


class FailoverBackend(_Regions[Backend]):
    """Several regional endpoints as one Backend, for Sequence."""

    @classmethod
    def over(cls, endpoints: Iterable[str], **http_options: Any) -> FailoverBackend:
        """One HttpBackend per endpoint, each with ``http_options`` (auth,
        timeout, retry). Its RetryPolicy's deadline is how long an endpoint
        is given before the next one is tried."""
        return cls(HttpBackend(endpoint, **http_options) for endpoint in endpoints)

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        """A block from the current region, else from the next ones in turn;
        ServiceUnavailable once every region has failed this request.
        Anything else a region answers (exhausted, bad request, a refused
        region configuration) is raised at once: another region would not
        make it right.

        A region that answers after refusing some attempts for capacity is
        hot, not down: its block is returned and nothing moves. Only a
        request it gave up on moves on, as any unavailability does (each
        region has its own counter item); the refusals of every region
        tried are added to what is returned, so that the Sequence backs off."""
        steps = self._tries()
        outcome: Block | ServiceUnavailable | None = None
        try:
            while True:
                index = steps.send(outcome)
                try:
                    outcome = self.backends[index].allocate(counter, count, idempotency_key=idempotency_key)
                except ServiceUnavailable as exc:
                    outcome = exc
        except StopIteration as done:
            return cast(Block, done.value)


class AsyncFailoverBackend(_Regions[AsyncBackend]):
    """FailoverBackend for AsyncSequence: the same choice of region, over
    AsyncHttpBackends (or any backend with a coroutine ``allocate``)."""

    @classmethod
    def over(cls, endpoints: Iterable[str], **http_options: Any) -> AsyncFailoverBackend:
        """One AsyncHttpBackend per endpoint (needs idblocks[async])."""
        from idblocks.async_backend import AsyncHttpBackend

        return cls(AsyncHttpBackend(endpoint, **http_options) for endpoint in endpoints)

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        steps = self._tries()
        outcome: Block | ServiceUnavailable | None = None
        while True:
            try:
                index = steps.send(outcome)
            except StopIteration as done:
                return cast(Block, done.value)
            try:
                outcome = await self.backends[index].allocate(counter, count, idempotency_key=idempotency_key)
            except ServiceUnavailable as exc:
                outcome = exc
