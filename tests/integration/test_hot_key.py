"""A hot counter against a per-item write budget, for real but small: the
embedded DynamoDB takes a few dozen writes/s per item (AWS takes about 1,000
per item), and several dev servers stand for several Lambda environments.
The same load meets the budget through uncached `next` (a write per ID),
and needs two writes per environment through `Sequence`, a few through
`next` with a cache."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import requests

from devserver.process import DevServer, run_devserver
from idblocks import HttpBackend, Sequence
from tests.support.cluster import cluster

WRITES_PER_SECOND = 20
SERVERS = 4
THREADS_PER_SERVER = 3
IDS_PER_THREAD = 25
# With cache 100 each server's blocks grow 1, 32, 100, 100: a handful of writes in all.
CACHED_IDS_PER_THREAD = 50
# The shortest timeout the template allows: a throttled request runs out of
# time for retries sooner, so the budget shows as 503s within a short run.
SHORT_TIMEOUT = ("--parameter", "FunctionTimeout=3")
# Enough 503s seen to stop early; each caller stops after MAX_CALLS anyway.
ENOUGH_REFUSALS = 5
MAX_CALLS = 60


def _run_threads(target, urls):
    threads = [
        threading.Thread(target=target, args=(url,), daemon=True)
        for url in urls
        for _ in range(THREADS_PER_SERVER)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)


def _call_next(urls, counter, calls, stop_after_refusals=None):
    """Threads per server each POST `next` on ``counter`` up to ``calls``
    times; returns the IDs answered and the responses that were not 200s.
    With ``stop_after_refusals``, everyone stops once that many were seen."""
    ids: list[int] = []
    refused: list[requests.Response] = []
    lock = threading.Lock()

    def caller(url: str) -> None:
        with requests.Session() as session:
            for _ in range(calls):
                response = session.post(f"{url}/counters/{counter}/next", timeout=60)
                with lock:
                    if response.status_code == 200:
                        ids.append(response.json()["id"])
                    else:
                        refused.append(response)
                    if stop_after_refusals is not None and len(refused) >= stop_after_refusals:
                        return

    _run_threads(caller, urls)
    return ids, refused


def test_uncached_next_on_a_hot_key_answers_503_with_retry_after_and_no_duplicate():
    """Many threads calling `next` on one counter, one item write per ID, go
    past the item's budget: DynamoDB's throttling reaches the caller as a 503
    with Retry-After once the function has no retries or time left, and every ID that
    was answered is distinct."""
    with cluster(servers=SERVERS, server_args=SHORT_TIMEOUT) as hot:
        # The budget's second never ends: past its writes, every write to the
        # item is throttled, however slowly a loaded machine sends them (at
        # 20 writes/s on the wall clock, a slow run stayed under the budget).
        hot.dynamodb.limit_item_writes(WRITES_PER_SECOND, clock=lambda: 0.0)
        ids, refused = _call_next(hot.urls, "hot", MAX_CALLS, stop_after_refusals=ENOUGH_REFUSALS)
        throttled_writes = hot.dynamodb.write_limit.throttled
        high_water = hot.high_water("hot")
    assert refused, "no request was turned away: the budget did not bite"
    assert {response.status_code for response in refused} == {503}
    assert all(int(response.headers["Retry-After"]) >= 1 for response in refused)
    assert {response.json()["error"]["code"] for response in refused} == {"service_unavailable"}
    assert [value for value, seen in Counter(ids).items() if seen > 1] == []
    assert ids, "no request was answered: the budget's writes went unused"
    assert max(ids) <= high_water
    assert throttled_writes > 0


# How many of a handful of writes land in one second, and so meet the item's
# budget, depends on how a loaded machine schedules the clients, not on the
# code: the two tests below assert the writes the code makes (blocks of 100,
# at most two per environment) and leave the budget to the test above. They
# run with the template's default FunctionTimeout: the short one is there to
# make throttling show quickly, and on a loaded machine it also turned away
# requests that were only slow (503 DeadlineExceeded). A 503 is retried, as
# the client does in production.


def test_the_same_load_through_sequence_gets_every_id_from_two_blocks_per_environment():
    """The same threads drawing from one Sequence per environment: every ID
    arrives, none twice, and each Sequence asked for at most two blocks of
    100 (the first, and the next one prefetched half way through it), where
    uncached `next` writes once per ID; the counter moved by those blocks
    and nothing else."""
    ids: list[int] = []
    lock = threading.Lock()
    with cluster(servers=SERVERS, item_write_limit=WRITES_PER_SECOND) as hot:
        # Its own counter: the embedded DynamoDB's tables live in this
        # process (moto), so "hot" still holds what the test above took.
        sequences = [Sequence(HttpBackend(url), "hot-sequence", initial_block=100) for url in hot.urls]

        def caller(url: str) -> None:
            sequence = sequences[hot.urls.index(url)]
            for _ in range(IDS_PER_THREAD):
                value = sequence.next_id()
                with lock:
                    ids.append(value)

        _run_threads(caller, hot.urls)
        for sequence in sequences:
            # Generous: a block request still out is waited for, so it counts.
            sequence.close(timeout=120)
        high_water = hot.high_water("hot-sequence")
    assert len(ids) == len(set(ids)) == SERVERS * THREADS_PER_SERVER * IDS_PER_THREAD
    # The second request is made once half the first block is drawn; a
    # Sequence closed before its prefetcher sent it made only one.
    assert all(1 <= sequence.requests <= 2 for sequence in sequences)
    assert high_water == 100 * sum(sequence.requests for sequence in sequences)


def test_the_same_load_through_cached_next_gets_every_id_from_a_few_blocks_per_environment():
    """The same threads calling `next` on a counter with cache 100: each dev
    server (an environment) takes blocks that grow from one ID to 100 in a
    few writes and answers from them, its threads sharing each block. Every
    call is answered, every ID once, and the counter moved by what was
    served and less than one block of 100 per server still held. Each call
    has its Idempotency-Key, so a retried one is answered its first ID,
    never a second."""
    ids: list[int] = []
    lock = threading.Lock()
    with cluster(servers=SERVERS, item_write_limit=WRITES_PER_SECOND) as hot:
        body = {"name": "hot-cached", "cache": 100}
        created = requests.post(f"{hot.urls[0]}/admin/counters", json=body, timeout=60)
        assert (created.status_code, created.json().get("cache")) == (201, 100), created.text

        def caller(url: str) -> None:
            backend = HttpBackend(url)
            for _ in range(CACHED_IDS_PER_THREAD):
                value = backend.next("hot-cached", idempotency_key=uuid.uuid4().hex)
                with lock:
                    ids.append(value)

        _run_threads(caller, hot.urls)
        high_water = hot.high_water("hot-cached")
    assert [value for value, seen in Counter(ids).items() if seen > 1] == []
    assert len(ids) == SERVERS * THREADS_PER_SERVER * CACHED_IDS_PER_THREAD
    assert len(ids) <= high_water < len(ids) + 100 * SERVERS


def test_the_dev_server_option_throttles_a_hot_item(tmp_path):
    """`--item-write-limit 1`: back-to-back `next` calls on one counter meet
    the budget (the service retries them), and the server reports how often
    it bit when it stops."""
    with DevServer("--fresh", "--item-write-limit", "1", state_file=tmp_path / "state.json") as dev:
        answers = [dev.post("/counters/slow/next") for _ in range(4)]
        dev.stop()
    ids = [answer.json()["id"] for answer in answers if answer.status_code == 200]
    assert len(ids) == len(set(ids))
    assert {answer.status_code for answer in answers} <= {200, 503}
    [report] = [line for line in dev.output if line.startswith("item writes throttled: ")]
    assert int(report.split(": ")[1]) >= 1


def test_bad_item_write_limits_are_refused():
    for args, message in (
        (["--item-write-limit", "0"], "at least 1"),
        (["--item-write-limit", "lots"], "not a whole number"),
        (["--item-write-limit", "5", "--dynamodb-endpoint", "http://127.0.0.1:9"], "embedded DynamoDB"),
    ):
        result = run_devserver(*args)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
