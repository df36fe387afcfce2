"""Three regions for real: three dev servers with RegionCount=3 and indexes
0, 1, 2, each with its own embedded DynamoDB and state file, drawn from
concurrently by several processes whose Sequences fail over between them.
One region is killed (SIGKILL) mid-run; no ID may be handed out twice, and
every ID must lie in the residue of the region that handed it out."""

from __future__ import annotations

import multiprocessing
import queue
import signal
import threading
from typing import Any

import pytest

from devserver.process import DevServer
from idblocks import FailoverBackend, HttpBackend, RetryPolicy, Sequence
from idblocks.block import Block

REGIONS = 3
WORKERS = 4
IDS_PER_WORKER = 1500
# After this many IDs a worker reports that it is under way; the kill comes
# once every worker has, so that it lands mid-run however slow the machine.
UNDER_WAY_AFTER = 300


class Recording:
    """One region's backend, noting which region answered each block."""

    def __init__(self, region: int, backend: HttpBackend, blocks: list[tuple[int, int, int, int]]) -> None:
        self.region, self.backend, self.blocks = region, backend, blocks

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        block = self.backend.allocate(counter, count, idempotency_key=idempotency_key)
        self.blocks.append((self.region, block.start, block.end, block.step))
        return block


def draw(worker: int, urls: list[str], under_way: Any, results: Any) -> None:
    """A worker process: a Sequence over the regions, starting with its own
    region (worker mod 3), drawing IDS_PER_WORKER IDs."""
    blocks: list[tuple[int, int, int, int]] = []
    # A dead region costs each request at most the policy's deadline.
    policy = RetryPolicy(attempts=3, base=0.01, cap=0.1, deadline=2.0)
    order = [(worker + i) % REGIONS for i in range(REGIONS)]
    backend = FailoverBackend(
        Recording(region, HttpBackend(urls[region], retry=policy, timeout=5.0), blocks) for region in order
    )
    ids: list[int] = []
    with Sequence(backend, "orders", initial_block=10, max_block=50) as seq:
        for _ in range(IDS_PER_WORKER):
            ids.append(seq.next_id())
            if len(ids) == UNDER_WAY_AFTER:
                under_way.release()
    results.put((worker, ids, blocks, backend.failovers))


def region_servers(tmp_path, count: int) -> list[DevServer]:
    return [
        DevServer(
            "--fresh",
            "--parameter",
            f"RegionCount={count}",
            "--parameter",
            f"RegionIndex={index}",
            state_file=tmp_path / f"region-{index}" / "state.json",
        )
        for index in range(count)
    ]


@pytest.mark.timeout(180)
def test_three_regions_with_failover_hand_out_no_id_twice(tmp_path):
    servers = region_servers(tmp_path, REGIONS)
    context = multiprocessing.get_context("spawn")
    workers: list[Any] = []
    try:
        for server in servers:
            server.start()
        urls = [server.url for server in servers]
        under_way = context.Semaphore(0)
        results = context.Queue()
        workers = [
            context.Process(target=draw, args=(worker, urls, under_way, results), daemon=True)
            for worker in range(WORKERS)
        ]
        for process in workers:
            process.start()
        for _ in range(WORKERS):
            assert under_way.acquire(timeout=120), "the workers never got under way"
        assert servers[0].stop(signal.SIGKILL, grace=0) == -signal.SIGKILL

        outcomes = []
        for _ in range(WORKERS):
            try:
                outcomes.append(results.get(timeout=120))
            except queue.Empty:
                pytest.fail("a worker did not finish: " + "".join(servers[1].output[-20:]))
        for process in workers:
            process.join(timeout=30)
    finally:
        for process in workers:
            if process.is_alive():
                process.kill()
                process.join(timeout=10)
        for server in servers:
            if server.process is not None and server.process.poll() is None:
                server.stop()

    every = [i for _, ids, _, _ in outcomes for i in ids]
    assert len(every) == WORKERS * IDS_PER_WORKER
    assert len(every) == len(set(every)), "an ID was handed out twice"
    region_of = {}
    for _, _, blocks, _ in outcomes:
        for region, start, end, step in blocks:
            assert step == REGIONS
            for i in range(start, end + 1, step):
                assert i % REGIONS == region, f"region {region} handed out {i}"
                assert region_of.setdefault(i, region) == region
    # Every ID drawn came in a block some region answered.
    assert set(every) <= set(region_of)
    # The workers that started on the killed region moved on: some request failed over.
    assert sum(failovers for *_, failovers in outcomes) >= 1
    # And the surviving regions both handed out IDs after the kill.
    assert {region_of[i] for i in every} >= {1, 2}


# -- order across a failover ------------------------------------------------------

ORDER_THREADS = 4
# Region 0 is this far ahead of region 1 when the run starts (another client
# drew that much from it), as a busier region is: its IDs are larger.
REGION_0_AHEAD = 100_000


@pytest.mark.timeout(180)
def test_across_a_failover_each_threads_ids_increase_within_each_region(tmp_path):
    """Given two dev servers as regions 0 and 1 of RegionCount=2, region 0
    far ahead, and a Sequence over both (region 0 first) drawn from by four
    threads, when region 0 stops mid-run, then no ID is handed out twice;
    on each thread the IDs of each region (residue) increase; every ID a
    thread had from region 0 came before its first from region 1; and that
    first ID is below the last from region 0: across a failover a thread's
    IDs go down once, as docs/guarantees.md says."""
    servers = region_servers(tmp_path, 2)
    with servers[0] as region_0, servers[1] as region_1:
        policy = RetryPolicy(attempts=3, base=0.01, cap=0.1, deadline=2.0)
        HttpBackend(region_0.url, retry=policy).allocate("orders", REGION_0_AHEAD, idempotency_key="ahead")
        backend = FailoverBackend(
            HttpBackend(url, retry=policy, timeout=5.0) for url in (region_0.url, region_1.url)
        )
        drawn: list[list[int]] = [[] for _ in range(ORDER_THREADS)]
        before_stop = threading.Barrier(ORDER_THREADS + 1)
        stopped = threading.Event()
        failed: list[BaseException] = []

        def work(slot: int) -> None:
            try:
                ids = drawn[slot]
                for _ in range(100):
                    ids.append(seq.next_id())
                before_stop.wait(timeout=120)
                assert stopped.wait(timeout=120)
                # Until this thread has had IDs from region 1 (bounded: the
                # blocks held from region 0 are a few hundred IDs at most).
                from_region_1 = 0
                for _ in range(5_000):
                    ids.append(seq.next_id())
                    from_region_1 += ids[-1] % 2
                    if from_region_1 == 50:
                        break
            except BaseException as exc:  # noqa: BLE001 - reported below
                failed.append(exc)

        with Sequence(backend, "orders", initial_block=10, max_block=50) as seq:
            threads = [threading.Thread(target=work, args=(slot,)) for slot in range(ORDER_THREADS)]
            for thread in threads:
                thread.start()
            before_stop.wait(timeout=120)
            assert region_0.stop() == 0
            stopped.set()
            for thread in threads:
                thread.join(timeout=120)
            assert not any(thread.is_alive() for thread in threads)
        assert failed == []

    every = [i for ids in drawn for i in ids]
    assert len(every) == len(set(every)), "an ID was handed out twice"
    assert backend.failovers >= 1
    for ids in drawn:
        from_0 = [i for i in ids if i % 2 == 0]
        from_1 = [i for i in ids if i % 2 == 1]
        assert from_0 == sorted(from_0)
        assert from_1 == sorted(from_1)
        assert len(from_0) >= 100
        assert len(from_1) == 50
        first_from_1 = ids.index(from_1[0])
        assert all(i % 2 == 0 for i in ids[:first_from_1])
        assert all(i % 2 == 1 for i in ids[first_from_1:])
        # The one step down: region 1's counter is far below region 0's.
        assert ids[first_from_1] < ids[first_from_1 - 1]
