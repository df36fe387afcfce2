"""Sequence across fork(): gunicorn --preload, Celery prefork, uWSGI and
multiprocessing's fork start method all copy a process that may hold a
Sequence. The copies must never hand out the same ID, and must not stall.

The processes share a SharedBackend (one SQLite file), which keeps the
service's contract across processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from idblocks import Sequence, ServiceUnavailable
from idblocks.testing import LOST_RESPONSE, UNAVAILABLE
from tests.support.shared_backend import SharedBackend

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()"),
    # Forking a process with threads (prefetchers, pytest's own) is what is tested.
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

# Far longer than a request to the SQLite file takes, even on a machine loaded
# by other work, and shorter than the wait_timeout of
# 30 s the tests set: a child that waits this long for a block is stalled,
# waiting out wait_timeout for a request nobody makes, not slow.
ONE_REQUEST = 20.0


def timed_draws(seq: Sequence, count: int) -> tuple[list[int], float]:
    ids, slowest = [], 0.0
    for _ in range(count):
        started = time.monotonic()
        ids.append(seq.next_id())
        slowest = max(slowest, time.monotonic() - started)
    return ids, slowest


def fork_child(work, out: Path) -> int:
    """Run ``work()`` in a forked child that writes its JSON result to ``out``
    and exits without ever returning into pytest."""
    pid = os.fork()
    if pid == 0:
        try:
            result = {"ok": work()}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            result = {"error": repr(exc)}
        try:
            out.write_text(json.dumps(result))
        finally:
            os._exit(0)
    return pid


def collect(pid: int, out: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"child {pid} did not finish within {timeout} s")
    result = json.loads(out.read_text())
    assert "error" not in result, result["error"]
    return result["ok"]


def test_a_forked_child_never_hands_out_its_parents_ids_and_does_not_stall(tmp_path):
    """Reproduces: one ID drawn, fork, 5 draws in each process gave [2..6]
    twice; and the child, with no prefetcher, waited wait_timeout and failed
    once the inherited block was spent."""
    backend = SharedBackend(tmp_path / "ids.db")
    seq = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    assert seq.next_id() == 1
    pid = fork_child(lambda: timed_draws(seq, 35), tmp_path / "child.json")
    parent_ids, _ = timed_draws(seq, 35)
    child_ids, child_slowest = collect(pid, tmp_path / "child.json")
    every = [1, *parent_ids, *child_ids]
    assert len(every) == len(set(every))
    assert child_ids == sorted(child_ids)
    assert child_slowest < ONE_REQUEST
    seq.close()


def test_a_forked_child_does_not_reuse_its_parents_pending_key(tmp_path):
    """Reproduces: a request whose response was lost keeps its key for the
    retry; a child inheriting that key would retry it too and get the very
    block its parent's retry gets."""
    backend = SharedBackend(tmp_path / "ids.db")
    seq = Sequence(backend, "orders", block_size=10, prefetch=False)
    backend.fail_next(1, LOST_RESPONSE)
    with pytest.raises(ServiceUnavailable):
        seq.next_id()  # 1..10 are taken; the answer is lost
    pid = fork_child(lambda: [seq.next_id()], tmp_path / "child.json")
    parent_id = seq.next_id()
    (child_id,) = collect(pid, tmp_path / "child.json")
    assert parent_id == 1  # the parent's retry found its block
    assert child_id > 10  # the child asked for a block of its own
    seq.close()


class LockedWhileBusy(SharedBackend):
    """Holds a lock of its own for the whole of a request, as an HTTP
    connection pool does while it hands out a connection: a child forked
    while the lock is held would wait for it forever."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.busy = threading.Lock()
        self.slow = threading.Event()
        self.inside = threading.Event()

    def allocate(self, counter: str, count: int, *, idempotency_key: str):
        with self.busy:
            if self.slow.is_set():
                self.inside.set()
                time.sleep(0.3)
            return super().allocate(counter, count, idempotency_key=idempotency_key)


def test_a_fork_during_a_block_request_does_not_copy_the_backend_mid_request(tmp_path):
    """Reproduces: a fork while the prefetcher was inside the backend copied
    the backend's lock held by a thread the child does not have; the child's
    first request then hung (seen as a hung multiprocessing pool worker)."""
    backend = LockedWhileBusy(tmp_path / "ids.db")
    seq = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    first = [seq.next_id() for _ in range(5)]
    backend.slow.set()
    first.append(seq.next_id())  # past the mark: the prefetch is on its way, slowly
    assert backend.inside.wait(10)  # the prefetcher holds the backend's lock now
    pid = fork_child(lambda: timed_draws(seq, 25), tmp_path / "child.json")
    child_ids, child_slowest = collect(pid, tmp_path / "child.json", timeout=30)
    parent_ids, _ = timed_draws(seq, 25)
    every = first + parent_ids + child_ids
    assert len(every) == len(set(every))
    assert child_slowest < ONE_REQUEST
    seq.close()


_POOL_SEQ: Sequence | None = None


def _draw_in_pool_worker(count: int) -> tuple[int, list[int], float]:
    assert _POOL_SEQ is not None
    ids, slowest = timed_draws(_POOL_SEQ, count)
    return os.getpid(), ids, slowest


def test_a_fork_pool_of_four_workers_shares_no_id(tmp_path):
    """Reproduces: multiprocessing's fork start method copies the Sequence
    into every worker, which then all hand out the same IDs."""
    global _POOL_SEQ
    backend = SharedBackend(tmp_path / "ids.db")
    _POOL_SEQ = Sequence(backend, "orders", block_size=10, wait_timeout=30)
    try:
        first = [_POOL_SEQ.next_id() for _ in range(6)]  # past the mark: a prefetch is under way
        with multiprocessing.get_context("fork").Pool(4) as pool:
            work = pool.map_async(_draw_in_pool_worker, [25] * 8)
            parent_ids, _ = timed_draws(_POOL_SEQ, 25)
            results = work.get(timeout=60)
        every = first + parent_ids + [i for _, ids, _ in results for i in ids]
        assert len(every) == len(set(every)) == 6 + 25 + 8 * 25
        assert max(slowest for _, _, slowest in results) < ONE_REQUEST
        by_worker: dict[int, list[int]] = {}
        for pid, ids, _ in results:
            by_worker.setdefault(pid, []).extend(ids)
        assert all(ids == sorted(ids) for ids in by_worker.values())
    finally:
        _POOL_SEQ.close()
        _POOL_SEQ = None


def test_a_pre_fork_server_pattern_shares_no_id(tmp_path):
    """Reproduces the pre-fork server (gunicorn --preload, uWSGI): the
    Sequence is made at import, before the workers are forked, and each
    worker serves requests on threads."""
    backend = SharedBackend(tmp_path / "ids.db")
    seq = Sequence(backend, "orders", initial_block=10, max_block=40, wait_timeout=30)
    seq.next_id()

    def serve() -> list[list[int]]:
        results: list[list[int]] = [[] for _ in range(3)]

        def handler(slot: int) -> None:
            results[slot] = timed_draws(seq, 30)[0]

        threads = [threading.Thread(target=handler, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=ONE_REQUEST * 6)
        return results

    outs = [tmp_path / f"worker-{i}.json" for i in range(4)]
    pids = [fork_child(serve, out) for out in outs]
    workers = [collect(pid, out) for pid, out in zip(pids, outs, strict=True)]
    parent = timed_draws(seq, 30)[0]
    every = parent + [i for threads in workers for ids in threads for i in ids]
    assert len(every) == len(set(every)) == 30 + 4 * 3 * 30
    assert all(ids == sorted(ids) for threads in workers for ids in threads)
    seq.close()


class FaultyShared(SharedBackend):
    """In each process, every 7th call loses its answer after taking the block
    and every 11th is refused before taking anything."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._count_lock = threading.Lock()
        self.calls = 0

    def allocate(self, counter: str, count: int, *, idempotency_key: str):
        with self._count_lock:
            self.calls += 1
            call = self.calls
        if call % 7 == 0:
            self.fail_next(1, LOST_RESPONSE)
        elif call % 11 == 0:
            self.fail_next(1, UNAVAILABLE)
        return super().allocate(counter, count, idempotency_key=idempotency_key)


def mixed_draws(seq: Sequence, rounds: int, slot: int, progress: list[int]) -> list[int]:
    """next_id() and take() mixed; a call that fails for want of the service
    is made again."""
    ids: list[int] = []
    for i in range(rounds):
        for _ in range(100):
            try:
                if i % 4 == slot % 4:
                    ids.extend(seq.take(1 + (i + slot) % 13))
                else:
                    ids.append(seq.next_id())
                break
            except ServiceUnavailable:
                continue
        else:
            raise AssertionError("the Sequence kept failing")
        progress[slot] = i
    return ids


def draw_on_threads(seq: Sequence, threads: int, rounds: int, progress: list[int]) -> list[threading.Thread]:
    results: list[list[int] | BaseException | None] = [None] * threads

    def run(slot: int) -> None:
        try:
            results[slot] = mixed_draws(seq, rounds, slot, progress)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            results[slot] = exc

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    return workers, results


def test_stress_threads_faults_and_a_fork_lose_and_repeat_nothing(tmp_path):
    """16 threads mix next_id() and take() on small blocks while responses get
    lost and requests refused, and the process forks in the middle (the child
    draws on 4 threads of its own): no ID twice in any process, every ID the
    backend took is handed out or counted unused, and IDs increase on each
    thread."""
    backend = FaultyShared(tmp_path / "ids.db")
    seq = Sequence(backend, "orders", initial_block=8, max_block=64, wait_timeout=30)
    rounds = 300
    progress = [0] * 16
    workers, results = draw_on_threads(seq, 16, rounds, progress)
    deadline = time.monotonic() + 60
    while sum(progress) < 16 * rounds // 2 and time.monotonic() < deadline:
        time.sleep(0.001)

    def child() -> dict[str, object]:
        child_progress = [0] * 4
        child_workers, child_results = draw_on_threads(seq, 4, rounds, child_progress)
        for worker in child_workers:
            worker.join(timeout=60)
        unused = seq.close()
        assert all(isinstance(ids, list) for ids in child_results), child_results
        return {"threads": child_results, "unused": unused, "pid": os.getpid()}

    out = tmp_path / "child.json"
    pid = fork_child(child, out)
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    parent_unused = seq.close()
    forked = collect(pid, out)
    assert all(isinstance(ids, list) for ids in results), results
    threads = [*results, *forked["threads"]]
    every = [i for ids in threads for i in ids]
    assert len(every) == len(set(every))
    assert all(ids == sorted(ids) for ids in threads)
    assert backend.handed_out() == len(every) + parent_unused + forked["unused"]
    assert backend.calls > 22  # faults were met
