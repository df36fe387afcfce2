"""An error that ends a block request reaches every caller waiting on it,
each as its own instance of the class the backend raised: the same class
(an InvalidName stays an InvalidName, whatever its constructor takes) and
the same words, with a traceback of the caller's own."""

from __future__ import annotations

import asyncio

import pytest

from idblocks import (
    AsyncSequence,
    CounterExhausted,
    InvalidName,
    MissingCredentials,
    MissingRegion,
    Sequence,
    UnexpectedResponse,
)
from tests.support.waiting import wait_until
from tests.unit.test_client_sequence_faults import at_once

WAITERS = 4


def errors():
    """Errors whose constructors differ from ServiceError's, and two that do not."""
    return [
        InvalidName("counter name must be 1-128 characters, not '..'"),
        MissingCredentials("no AWS credentials for SigV4"),
        MissingRegion("no AWS region for SigV4"),
        CounterExhausted(409, "counter_exhausted", "counter 'orders' is exhausted"),
        UnexpectedResponse("POST /counters/orders/batch answered without an integer 'start'"),
    ]


class FailsOnceAllWait:
    """A backend whose one request fails with ``error`` once every caller
    waits for it, the one whose request it is included (white-box: the
    Sequence's condition)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.seq: Sequence | None = None

    def allocate(self, counter, count, *, idempotency_key):
        assert self.seq is not None
        assert wait_until(lambda: len(self.seq._changed._waiters) == WAITERS)
        raise self.error


def outcomes_of_threads(seq: Sequence) -> list[BaseException]:
    return [outcome for outcome, _ in at_once(WAITERS, seq.next_id)]


def assert_each_its_own(outcomes: list[BaseException], error: Exception) -> None:
    assert [type(outcome) for outcome in outcomes] == [type(error)] * WAITERS
    assert {str(outcome) for outcome in outcomes} == {str(error)}
    assert len({id(outcome) for outcome in outcomes}) == WAITERS, "callers share one exception object"


@pytest.mark.parametrize("error", errors(), ids=lambda e: type(e).__name__)
def test_every_thread_waiting_on_a_request_hears_its_error_as_the_class_raised(error):
    """Reproduces: the threads that waited on the failed request got a
    TypeError (InvalidName, MissingCredentials, MissingRegion), or all
    shared the first thread's exception object (UnexpectedResponse)."""
    backend = FailsOnceAllWait(error)
    seq = Sequence(backend, "orders", block_size=10, prefetch=False, wait_timeout=60)
    backend.seq = seq
    outcomes = outcomes_of_threads(seq)
    seq.close(timeout=0)
    assert_each_its_own(outcomes, error)


class AsyncFails:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def allocate(self, counter, count, *, idempotency_key):
        await asyncio.sleep(0)
        raise self.error


@pytest.mark.parametrize("error", errors(), ids=lambda e: type(e).__name__)
def test_every_task_waiting_on_a_request_hears_its_error_as_the_class_raised(error):
    """Reproduces: every task got a TypeError instead of InvalidName,
    MissingCredentials or MissingRegion, and all tasks shared one
    UnexpectedResponse object, whose traceback gathered every task's frames."""

    async def main():
        seq = AsyncSequence(AsyncFails(error), "orders", block_size=10, prefetch=False)
        outcomes = await asyncio.gather(*(seq.next_id() for _ in range(WAITERS)), return_exceptions=True)
        await seq.aclose(timeout=0)
        return outcomes

    assert_each_its_own(asyncio.run(main()), error)
