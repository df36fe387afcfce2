"""AsyncSequence across fork(), as Sequence: a forked child drops the blocks
and the pending request it inherited (its parent's) and fetches its own, with
keys drawn in the child. Pre-fork servers make the sequence at import and run
an event loop in each worker."""

from __future__ import annotations

import asyncio
import os

import pytest

from idblocks import AsyncSequence
from idblocks.testing import LOST_RESPONSE
from tests.integration.test_client_fork import collect, fork_child
from tests.support.shared_backend import SharedBackend

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


class AsyncShared:
    """SharedBackend (one SQLite file forked processes share) behind a coroutine."""

    def __init__(self, shared: SharedBackend) -> None:
        self.shared = shared

    async def allocate(self, counter, count, *, idempotency_key):
        return await asyncio.to_thread(self.shared.allocate, counter, count, idempotency_key=idempotency_key)


async def draws(seq: AsyncSequence, count: int) -> list[int]:
    return [await seq.next_id() for _ in range(count)]


def test_a_forked_child_never_hands_out_its_parents_ids(tmp_path):
    shared = SharedBackend(tmp_path / "ids.db")
    seq = AsyncSequence(AsyncShared(shared), "orders", block_size=10, wait_timeout=30)
    assert asyncio.run(draws(seq, 1)) == [1]
    pid = fork_child(lambda: asyncio.run(draws(seq, 35)), tmp_path / "child.json")
    parent_ids = asyncio.run(draws(seq, 35))
    child_ids = collect(pid, tmp_path / "child.json")
    every = [1, *parent_ids, *child_ids]
    assert len(every) == len(set(every))
    assert child_ids == sorted(child_ids)
    assert parent_ids == sorted(parent_ids)


def test_a_forked_child_does_not_reuse_its_parents_pending_key(tmp_path):
    shared = SharedBackend(tmp_path / "ids.db")
    seq = AsyncSequence(AsyncShared(shared), "orders", block_size=10, prefetch=False)

    async def lose_the_first_answer():
        shared.fail_next(1, LOST_RESPONSE)
        await seq.start()  # 1..10 are taken; the answer is lost
        await asyncio.wait({seq._request_task})

    asyncio.run(lose_the_first_answer())
    assert seq._pending is not None
    pid = fork_child(lambda: asyncio.run(draws(seq, 1)), tmp_path / "child.json")
    (parent_id,) = asyncio.run(draws(seq, 1))
    (child_id,) = collect(pid, tmp_path / "child.json")
    assert parent_id == 1  # the parent's retry found its block
    assert child_id > 10  # the child asked for a block of its own
