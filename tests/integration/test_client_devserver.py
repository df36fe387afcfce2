"""The client against the real service: the dev server over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from idblocks import CounterExhausted, HttpBackend, RetryPolicy, Sequence
from idblocks.block import Block
from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.ledger import next_of, skipped
from tests.support.proxy import LossyProxy


def test_sequence_over_http_accounts_for_every_id(dev):
    seq = Sequence(HttpBackend(dev.url), "seq-http", initial_block=10)
    ids = [seq.next_id() for _ in range(500)]
    unused = seq.close()
    assert ids == list(range(1, 501))
    # the service handed out exactly what was used plus what close() reported
    assert next_of(dev, "seq-http") - 1 == 500 + unused


# -- what a process skips when it stops ------------------------------------------------
# Measured by how far the counter moved (the admin GET), and the requests by a
# proxy that forwards them (losing none), not by the client's own counts.


def steadily(draw: Callable[[], object], rate: int, count: int) -> float:
    """``draw`` ``count`` times, about ``rate`` times a second in ticks of 10
    ms (a slow machine takes longer, never a catching-up burst): how many
    seconds it took. A count, not a time: however slow the machine, the
    block given up front is used up."""
    started = time.monotonic()
    for _ in range(count // (rate // 100)):
        for _ in range(rate // 100):
            draw()
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_process_that_takes_one_id_and_closes_skips_at_most_15(dev):
    seq = Sequence(HttpBackend(dev.url), "gaps-one")
    seq.next_id()
    seq.close()
    assert skipped(dev, "gaps-one", 1) <= 15


def test_10000_ids_as_fast_as_they_come_skip_at_most_10000_in_at_most_12_requests(dev):
    with LossyProxy(dev.url) as counting:
        seq = Sequence(HttpBackend(counting.url), "gaps-burst")
        for _ in range(10_000):
            seq.next_id()
        seq.close()
        requests = counting.forwarded
    assert skipped(dev, "gaps-burst", 10_000) <= 10_000
    assert requests <= 12


def test_after_drain_and_8_s_at_a_steady_rate_close_skips_at_most_1_s_of_ids(dev):
    # Given a process using about 1,000 IDs/s, with blocks of 5 s (its rate
    # given up front) of which it holds up to 7.5 s
    rate = 1_000
    seq = Sequence(HttpBackend(dev.url), "gaps-drain", initial_block=5 * rate)
    before = 3 * rate
    steadily(seq.next_id, rate, before)
    # When it drains and goes on at that rate for 8 s (8 s of IDs), then closes
    seq.drain()
    during = 8 * rate
    seconds = steadily(seq.next_id, rate, during)
    seq.close()
    # Then what it skipped is at most a second's worth at the rate it drew
    assert skipped(dev, "gaps-drain", before + during) <= during / seconds


def test_a_lost_response_and_its_retry_take_one_block(dev):
    with LossyProxy(dev.url) as proxy:
        backend = HttpBackend(proxy.url, retry=RetryPolicy(base=0.01))
        backend.allocate("lossy", 5)  # [1, 5]
        proxy.lose = 1
        block = backend.allocate("lossy", 10)
        assert proxy.lost == [("POST", "/counters/lossy/batch", 200)]  # it was applied, then lost
    # the retry got the block the lost response carried, not a second one
    assert block == Block(6, 15)
    assert next_of(dev, "lossy") == 16


def test_a_sequence_rides_through_lost_responses(dev):
    with LossyProxy(dev.url) as proxy:
        seq = Sequence(HttpBackend(proxy.url, retry=RetryPolicy(base=0.01)), "lossy-seq", block_size=20)
        ids = []
        for _ in range(10):
            proxy.lose = 1
            ids += [seq.next_id() for _ in range(20)]
        unused = seq.close()
    assert ids == list(range(1, 201))
    assert len(proxy.lost) == 10
    assert next_of(dev, "lossy-seq") - 1 == 200 + unused  # no block burned


def test_an_exhausted_counter_surfaces_after_the_buffer(dev):
    backend = HttpBackend(dev.url)
    backend.create("small", max_id=30)
    seq = Sequence(backend, "small", block_size=10)
    assert [seq.next_id() for _ in range(30)] == list(range(1, 31))
    with pytest.raises(CounterExhausted):
        seq.next_id()
    seq.close()


def test_processes_and_threads_sharing_a_counter_never_repeat_an_id(dev, tmp_path):
    processes, threads, per_thread = 3, 8, 1000
    outs = [tmp_path / f"ids-{p}.txt" for p in range(processes)]
    env = scrubbed_environment()
    command = [
        sys.executable,
        "-m",
        "tests.support.draw_ids",
        dev.url,
        "shared",
        str(threads),
        str(per_thread),
    ]
    workers = [subprocess.Popen([*command, "50", str(out)], cwd=ROOT, env=env) for out in outs]
    for worker in workers:
        assert worker.wait(timeout=300) == 0
    ids, unused = [], 0
    for out in outs:
        lines = out.read_text().splitlines()
        unused += int(lines[0].split()[-1])
        ids += [int(line) for line in lines[1:]]
    assert len(ids) == processes * threads * per_thread
    assert len(set(ids)) == len(ids)
    high_water = next_of(dev, "shared") - 1
    assert max(ids) <= high_water
    assert high_water == len(ids) + unused  # nothing lost either


# -- the CLI -------------------------------------------------------------------


def cli(dev, *args, env=None):
    environment = scrubbed_environment()
    environment |= {"IDBLOCKS_URL": dev.url} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "idblocks.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def test_cli_covers_every_route(dev):
    assert json.loads(cli(dev, "create", "cli-c", "--start", "100").stdout)["next"] == 100
    assert json.loads(cli(dev, "next", "cli-c").stdout) == {"counter": "cli-c", "id": 100}
    assert json.loads(cli(dev, "batch", "cli-c", "10").stdout) == {
        "counter": "cli-c", "start": 101, "end": 110, "count": 10, "step": 1,
    }  # fmt: skip
    assert json.loads(cli(dev, "get", "cli-c").stdout)["next"] == 111
    assert json.loads(cli(dev, "set", "cli-c", "500").stdout)["next"] == 500
    names = [c["name"] for c in json.loads(cli(dev, "list", "--limit", "1", "--all").stdout)["counters"]]
    assert "cli-c" in names
    assert len(names) == len(set(names))
    assert json.loads(cli(dev, "delete", "cli-c").stdout) == {"deleted": "cli-c"}


def test_cli_idempotency_key_repeats_the_answer(dev):
    first = cli(dev, "batch", "cli-k", "5", "--idempotency-key", "abc")
    again = cli(dev, "batch", "cli-k", "5", "--idempotency-key", "abc")
    assert first.stdout == again.stdout


@pytest.mark.parametrize(
    ("args", "status", "fragment"),
    [
        (["get", "cli-missing"], 3, "counter_not_found"),
        (["set", "cli-back", "1"], 4, "counter_would_move_back"),
        (["create", "bad name"], 2, "invalid_name"),  # refused before sending
        (["create", "cli-y", "--start", "10", "--max", "5"], 2, "invalid_start"),  # refused by the service
        (["batch", "cli-x", "0"], 2, "at least 1"),
        (["batch", "cli-x", "many"], 2, "not an integer"),
    ],
)
def test_cli_errors_are_one_line_with_a_status(dev, args, status, fragment):
    cli(dev, "create", "cli-back", "--start", "10")
    done = cli(dev, *args)
    assert done.returncode == status
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3  # argparse adds its usage line


def test_cli_without_an_endpoint_or_service(dev):
    no_url = cli(dev, "next", "x", env={"IDBLOCKS_URL": ""})
    assert (no_url.returncode, "IDBLOCKS_URL" in no_url.stderr) == (2, True)
    down = cli(dev, "--endpoint", "http://127.0.0.1:9", "--timeout", "0.5", "next", "x")
    assert down.returncode == 5
    assert "Traceback" not in down.stderr
