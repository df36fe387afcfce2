"""Lambda SnapStart and the client: every environment restored from one
snapshot starts from the same memory, so whatever a Sequence held at the
snapshot, and any block request it had made, are every restored
environment's. After each restore the runtime runs the functions registered
with snapshot_restore_py (tests.support.snapstart runs them as it does); from
then on nothing held before is handed out, and no key sent before is sent
again. Two restored copies, each in a process of its own:
tests/integration/test_client_snapstart_restore.py."""

from __future__ import annotations

import asyncio
import math
import socket
import threading

import botocore.session
import pytest

from idblocks import AsyncSequence, HttpBackend, IamAuth, RetryPolicy, Sequence, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend
from idblocks.block import Block
from idblocks.testing import LOST_RESPONSE, AsyncMemoryBackend, MemoryBackend
from tests.support.sequence_model import wait_for
from tests.support.snapstart import restore
from tests.support.stub_http import StubServer
from tests.unit.test_client_close import in_thread

BLOCK = (200, {}, {"counter": "orders", "start": 101, "end": 200, "count": 100})
UNAVAILABLE = (503, {}, {"error": {"code": "service_unavailable", "message": "try again"}})


class KeyedMemory(MemoryBackend):
    """MemoryBackend that notes every key it is sent, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.keys.append(idempotency_key)
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def test_a_sequence_hands_out_nothing_it_held_before_a_restore():
    """Reproduces: a Sequence drew 1, 2, 3 during init (holding the block up
    to 100); after the restore hooks ran it drew 4, 5, 6, as every restored
    environment would."""
    backend = MemoryBackend()
    seq = Sequence(backend, "orders", initial_block=100)
    assert [seq.next_id() for _ in range(3)] == [1, 2, 3]  # init
    assert restore() >= 1, "the client registered no after-restore function"
    after = [seq.next_id() for _ in range(3)] + list(seq.take(5))
    assert min(after) > 100, f"handed out {after} after the restore: the snapshot's block"
    assert backend.blocks[1].start == 101  # a block of its own
    # The 97 IDs held at the restore are counted, with what the new blocks leave.
    assert seq.close() == 97 + sum(map(len, backend.blocks[1:])) - 8


def test_an_async_sequence_hands_out_nothing_it_held_before_a_restore():
    backend = AsyncMemoryBackend()
    seq = AsyncSequence(backend, "orders", initial_block=100)

    async def draw(n: int) -> list[int]:
        return [await seq.next_id() for _ in range(n)]

    assert asyncio.run(draw(3)) == [1, 2, 3]  # init
    assert restore() >= 1, "the client registered no after-restore function"
    after = asyncio.run(draw(3))
    assert min(after) > 100, f"handed out {after} after the restore: the snapshot's block"

    async def close() -> int:
        return await seq.aclose()

    assert asyncio.run(close()) == 97 + sum(map(len, backend.blocks[1:])) - 3


def test_a_request_whose_answer_was_lost_before_a_restore_is_not_sent_again_with_its_key():
    """Reproduces: a block request whose answer was lost during init stays
    pending with its key; sent again after the restore, every restored
    environment would be answered the same block."""
    backend = KeyedMemory()
    seq = Sequence(backend, "orders", prefetch=False, initial_block=100)
    backend.fail_next(1, LOST_RESPONSE)
    with pytest.raises(ServiceUnavailable):
        seq.next_id()  # 1..100 are taken; the answer is lost
    (snapshot_key,) = backend.keys
    restore()
    first = seq.next_id()
    assert backend.keys.count(snapshot_key) == 1, "the snapshot's key was sent again"
    assert first > 100
    seq.close()


class KeyedAsync(AsyncMemoryBackend):
    """AsyncMemoryBackend that notes every key it is sent, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.keys.append(idempotency_key)
        return await super().allocate(counter, count, idempotency_key=idempotency_key)


def test_an_async_request_cancelled_with_its_loop_before_a_restore_is_not_sent_again_with_its_key():
    """asyncio.run() at init cancels the prefetch it leaves on the network:
    the request stays pending with its key, for the snapshot."""
    backend = KeyedAsync()
    seq = AsyncSequence(backend, "orders", block_size=10)

    async def init() -> list[int]:
        ids = [await seq.next_id()]
        backend.latency = 30.0  # the prefetch is still on its way when init ends
        return ids + [await seq.next_id() for _ in range(5)]  # past the mark: a prefetch goes out

    assert asyncio.run(init()) == [1, 2, 3, 4, 5, 6]
    snapshot_key = backend.keys[-1]
    assert seq._pending is not None  # white-box: kept for a retry, key and count
    assert seq._pending.key == snapshot_key
    restore()
    backend.latency = 0.0

    async def after() -> list[int]:
        return [await seq.next_id() for _ in range(3)]

    ids = asyncio.run(after())
    assert backend.keys.count(snapshot_key) == 1, "the snapshot's key was sent again"
    assert not set(ids) & set(range(7, 11)), f"handed out {ids}: held at the snapshot"


class HeldOnTheNetwork(KeyedMemory):
    """The block request made once ``hold`` is set stays on the network until
    ``release`` is set, as one on its way at the snapshot is."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.inside = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        if self.hold.is_set() and not self.inside.is_set():
            self.inside.set()
            self.keys.append(idempotency_key)
            assert self.release.wait(60)  # longer than any test waits for the others
            try:
                return MemoryBackend.allocate(self, counter, count, idempotency_key=idempotency_key)
            finally:
                self.answered.set()
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def test_a_block_request_on_the_network_at_a_restore_is_abandoned():
    """The prefetcher thread is on the network at the snapshot, and lives on
    in the restored environment: its answer (the block every restored copy
    gets) is dropped, and the next draw asks afresh."""
    backend = HeldOnTheNetwork()
    seq = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    assert seq.next_id() == 1
    backend.hold.set()
    ids = [seq.next_id() for _ in range(5)]  # past the mark: the prefetcher asks for the next block
    assert backend.inside.wait(30)
    snapshot_key = backend.keys[-1]
    restore()
    backend.release.set()
    assert backend.answered.wait(30)
    # Once the prefetcher has settled the answer and waits again (white-box), draw.
    wait_for(lambda: len(seq._changed._waiters) == 1, "the prefetcher did not come back to wait")
    after = [seq.next_id() for _ in range(15)]
    _, in_flight = backend._by_key[snapshot_key]  # white-box: the block the abandoned request took
    assert backend.keys.count(snapshot_key) == 1, "the snapshot's key was sent again"
    assert not set(after) & (set(range(7, 11)) | set(in_flight.ids())), (
        f"handed out {after} after the restore, with {ids} drawn before"
    )
    assert len(set(after)) == 15
    seq.close()


def test_a_thread_waiting_on_the_abandoned_request_asks_afresh_at_once():
    """A thread that waits for another's block request when the restore comes
    does not wait for that request (abandoned: its answer will be dropped),
    nor out its wait_timeout: it asks for a block of its own."""
    backend = HeldOnTheNetwork()
    seq = Sequence(backend, "orders", prefetch=False, wait_timeout=60)
    backend.hold.set()
    fetcher = threading.Thread(target=seq.next_id)
    fetcher.start()  # its request stays on the network
    assert backend.inside.wait(30)
    waiter_got: list[int] = []
    waiter = threading.Thread(target=lambda: waiter_got.append(seq.next_id()))
    waiter.start()
    # White-box: the first thread waits for its own request, the second for it too.
    wait_for(lambda: len(seq._changed._waiters) == 2, "the second thread did not wait")
    restore()
    waiter.join(20)  # far longer than a block takes, shorter than the held request's wait
    assert waiter_got, "the waiting thread still waits for the abandoned request"
    backend.release.set()
    fetcher.join(30)
    assert backend.answered.wait(30)  # the abandoned request, on a thread of its own
    _, abandoned = backend._by_key[backend.keys[0]]  # white-box
    assert waiter_got[0] not in abandoned.ids()
    seq.close()


def test_a_task_waiting_on_the_abandoned_request_asks_afresh_at_once():
    """As for threads, with a loop kept across invocations: the restore comes
    between two runs of it, with a task waiting for a block."""
    backend = KeyedAsync()
    on_the_network = asyncio.Event()
    release = asyncio.Event()
    allocate = backend.allocate

    async def held_first(counter: str, count: int, *, idempotency_key: str) -> Block:
        if not on_the_network.is_set():
            on_the_network.set()
            await release.wait()
        return await allocate(counter, count, idempotency_key=idempotency_key)

    backend.allocate = held_first
    seq = AsyncSequence(backend, "orders", wait_timeout=math.inf)
    loop = asyncio.new_event_loop()
    try:
        waiting = loop.create_task(seq.next_id())
        loop.run_until_complete(on_the_network.wait())  # the task waits; the request is out
        restore()
        got = loop.run_until_complete(asyncio.wait_for(waiting, 30))  # far longer than it takes
        assert backend.keys.count(backend.keys[0]) == 1
        assert got == 1  # of a block asked for afresh: the abandoned request took nothing yet
        release.set()
        loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(loop)))  # the abandoned one ends
        loop.run_until_complete(seq.aclose())
    finally:
        loop.close()


def test_an_http_request_begun_before_a_restore_is_not_retried_after_it():
    """The backend retries a request whose attempt failed with its key; one
    begun before the restore is not retried after it: every restored copy
    would send it."""
    with StubServer([UNAVAILABLE, BLOCK]) as stub:
        # The restore falls between the failed attempt and its retry.
        backend = HttpBackend(stub.url, retry=RetryPolicy(base=0.001, cap=0.01, sleep=lambda _: restore()))
        with pytest.raises(ServiceUnavailable, match="before a restore"):
            backend.allocate("orders", 100, idempotency_key="at-the-snapshot")
        assert len(stub.requests) == 1
        backend.retry = RetryPolicy(base=0.001, cap=0.01)
        assert backend.allocate("orders", 100) == Block(101, 200)  # begun after it: sent
        backend.close()


def test_an_async_http_request_begun_before_a_restore_is_not_retried_after_it():
    with StubServer([UNAVAILABLE, BLOCK, BLOCK]) as stub:
        backend = AsyncHttpBackend(stub.url, retry=RetryPolicy(base=0.001, cap=0.01))
        attempt = backend._attempt

        async def then_restore(step):  # white-box: the restore falls after the first attempt
            reply = await attempt(step)
            restore()
            return reply

        async def main() -> Block:
            backend._attempt = then_restore
            with pytest.raises(ServiceUnavailable, match="before a restore"):
                await backend.allocate("orders", 100, idempotency_key="at-the-snapshot")
            assert len(stub.requests) == 1
            backend._attempt = attempt
            try:
                return await backend.allocate("orders", 100)
            finally:
                await backend.aclose()

        assert asyncio.run(main()) == Block(101, 200)


def test_after_a_restore_a_backend_opens_connections_of_its_own_and_reseeds_its_jitter():
    """The pool's keep-alive connections were the snapshot's: closed, and the
    next request goes on a new one. The retry jitter's generator is reseeded:
    copies of one snapshot would otherwise retry in step."""
    from tests.integration.test_client_http_fork import KeepAliveServer

    with KeepAliveServer() as server:
        backend = HttpBackend(server.url)
        backend.allocate("orders", 10)
        snapshot_pool = backend._http
        jitter = backend.retry.rng.getstate()
        restore()
        backend.allocate("orders", 10)
        assert server.ports[1] != server.ports[0], "the request went on the snapshot's connection"
        assert not snapshot_pool.pools, "the snapshot's connections were left open"
        assert backend.retry.rng.getstate() != jitter
        backend.close()


def test_after_a_restore_an_async_backend_makes_a_client_of_its_own_and_reseeds_its_jitter():
    with StubServer([BLOCK, BLOCK]) as stub:
        backend = AsyncHttpBackend(stub.url)
        loop = asyncio.new_event_loop()  # kept across invocations, as a handler may keep one
        try:
            loop.run_until_complete(backend.allocate("orders", 100))
            snapshot_client = backend._client
            jitter = backend.retry.rng.getstate()
            restore()
            loop.run_until_complete(backend.allocate("orders", 100))
            assert backend._client is not snapshot_client
            assert backend.retry.rng.getstate() != jitter
            loop.run_until_complete(backend.aclose())
            loop.run_until_complete(snapshot_client.aclose())  # the test's own tidying
        finally:
            loop.close()


# -- a request waiting on its way out at a restore ---------------------------------
# The key of a request goes out only if no restore came since the request
# began: whatever it waited for in between (its signature, its host's
# address, a caller's own wrapper) is behind the check, which the transport
# makes last before it writes. Two restored copies of an asyncio process:
# tests/integration/test_client_snapstart_restore.py; a thread cannot be
# carried into a copy of the process, so these show it in one.

SNAPSHOT_KEY = "drawn-before-the-restore"


class WaitsOnce:
    """A step that, the first time, waits until the test lets it go."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        if not self.inside.is_set():
            self.inside.set()
            assert self.release.wait(30), "the test never let the step go"


class SigningWaits(IamAuth):
    """IamAuth whose first signature waits (a role's credentials, fetched the first time)."""

    def __init__(self, step: WaitsOnce) -> None:
        session = botocore.session.Session()
        session.set_credentials("AKIARESTORETEST00001", "restore-test-secret")
        super().__init__(region="eu-west-1", session=session)
        self.step = step

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        self.step()
        return super().headers(method, url, body)


@pytest.mark.parametrize("where", ["signing", "resolving"])
def test_a_thread_whose_request_waits_at_a_restore_sends_nothing_after_it(where, monkeypatch):
    """Given a thread whose keyed block request waits for its SigV4
    signature, or for its host's address, when the restore comes and the
    wait then ends, then the request fails as begun before the restore and
    the server never receives its key."""
    step = WaitsOnce()
    with StubServer([BLOCK]) as stub:
        if where == "signing":
            backend = HttpBackend(stub.url, auth=SigningWaits(step))
        else:
            resolve, port = socket.getaddrinfo, stub.url.rsplit(":", 1)[1]

            def slow_first(host, *args, **kwargs):
                if host == "restored.invalid":  # a name only this test knows
                    step()
                    host = "127.0.0.1"
                return resolve(host, *args, **kwargs)

            monkeypatch.setattr(socket, "getaddrinfo", slow_first)
            backend = HttpBackend(f"http://restored.invalid:{port}")
        thread, got = in_thread(lambda: backend.allocate("orders", 100, idempotency_key=SNAPSHOT_KEY))
        assert step.inside.wait(30)
        restore()
        step.release.set()
        thread.join(30)
        assert stub.requests == [], "the request begun before the restore was sent after it"
        backend.close()
    (outcome,) = got
    assert isinstance(outcome, ServiceUnavailable), outcome
    assert "before a restore" in str(outcome)


class WrapperWaits:
    """A caller's own backend around HttpBackend (metrics, say) that, the
    first time, waits before passing the request on: the Sequence drew the
    request's key before the restore, the backend sees the request after."""

    def __init__(self, inner: HttpBackend, step: WaitsOnce) -> None:
        self.inner, self.step, self.keys = inner, step, []

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.keys.append(idempotency_key)
        self.step()
        return self.inner.allocate(counter, count, idempotency_key=idempotency_key)


def test_a_sequence_request_whose_key_was_drawn_before_a_restore_is_not_sent_after_it():
    """Given a Sequence whose block request, its key drawn, waits in the
    caller's own backend when the restore comes, when it goes on after the
    restore, then its key is never sent: the HTTP backend counts the request
    as begun when the Sequence drew its key, and the caller is served from a
    request of its own, made after the restore."""
    step = WaitsOnce()
    with StubServer([BLOCK, BLOCK]) as stub:  # one to spare: a key sent after all is answered
        backend = WrapperWaits(HttpBackend(stub.url), step)
        seq = Sequence(backend, "orders", prefetch=False, initial_block=100, wait_timeout=30)
        thread, got = in_thread(seq.next_id)
        assert step.inside.wait(30)
        restore()
        step.release.set()
        thread.join(30)
        sent = [request["headers"]["Idempotency-Key"] for request in stub.requests]
        seq.close()
        backend.inner.close()
    snapshot_key, *later = backend.keys
    assert snapshot_key not in sent, "the key drawn before the restore was sent after it"
    assert sent == later != []
    assert got == [101]  # of the block asked for afresh


class AsyncWrapperWaits:
    """WrapperWaits for an AsyncSequence: the first request waits on the loop."""

    def __init__(self, inner: AsyncHttpBackend) -> None:
        self.inner, self.keys = inner, []
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.keys.append(idempotency_key)
        if not self.inside.is_set():
            self.inside.set()
            await self.release.wait()
        return await self.inner.allocate(counter, count, idempotency_key=idempotency_key)


async def others_end() -> None:
    await asyncio.gather(*asyncio.all_tasks() - {asyncio.current_task()})


def test_an_async_sequence_request_whose_key_was_drawn_before_a_restore_is_not_sent_after_it():
    """As for threads, in a loop kept across invocations: the request's task
    waits in the caller's backend at the snapshot and goes on after it."""
    with StubServer([BLOCK, BLOCK]) as stub:
        backend = AsyncWrapperWaits(AsyncHttpBackend(stub.url))
        seq = AsyncSequence(backend, "orders", prefetch=False, initial_block=100, wait_timeout=30)
        loop = asyncio.new_event_loop()
        try:
            caller = loop.create_task(seq.next_id())
            loop.run_until_complete(backend.inside.wait())
            restore()
            backend.release.set()
            got = loop.run_until_complete(asyncio.wait_for(caller, 30))
            loop.run_until_complete(others_end())  # the abandoned request's task
            loop.run_until_complete(seq.aclose())
            loop.run_until_complete(backend.inner.aclose())
        finally:
            loop.close()
        sent = [request["headers"]["Idempotency-Key"] for request in stub.requests]
    snapshot_key, *later = backend.keys
    assert snapshot_key not in sent, "the key drawn before the restore was sent after it"
    assert sent == later != []
    assert got == 101
