"""What a client skips when its process stops, today's policy beside the new
one, in one run.

    python -m bench gaps      (make bench runs all benchmarks)

Writes bench/results/gaps.json (a flat object).

THE POLICIES. Both are the client's own sizing code (idblocks.sizing, run by
a real Sequence that only sizes: its backend is never asked): "new" as the
client ships it (a first block of 16; while young, no block brings what is
held above what was used; drain()), and "today" as idblocks 1.0 sized (a
first block of 100, growing up to 8 times a block; no start bound; no
drain): the same Sequence with initial_block=100 and the start bound off.
The Node client's sizing is the Python one's, operation for operation
(tests/integration/test_client_node_policy.py replays the same operations
in both), so what is simulated here holds for it too.

THE SIMULATIONS (simulated time; every figure a constant of this module).
A process draws IDs at a steady rate from its start to its stop; block
requests take LATENCY (lognormal, median 37 ms, sigma 0.35: the round trip
of bench/scale.py's keyed block request), the prefetch point is the
Sequence's own prefetch_tail, demand that finds no ID waits and is served
first when a block lands. At the stop, close waits for a request on the
network: what it skips is what it holds then, and that request's block.
  - fleet: FLEET_PROCESSES (20) processes share FLEET_RATE (1,000 IDs/s),
    DEPLOYS (10) rolling deploys a day each stop every process once (so
    each lives 2.4 h, its length spread by a minute either way); with
    drain, each drains DEREGISTRATION (10 s) before it stops, the time a
    load balancer takes to take it out of service, and serves on at its
    rate meanwhile;
  - restarts: one process, restarted DEPLOYS times a day, at 1,000 IDs/s
    (a service's order numbers) and at 1 ID/s (an invoice series);
  - drain windows: what a stop skips when the process serves on for 0 to 60
    s after drain() (what each way of calling it buys: docs/shutdown.md).
Per day: the IDs skipped and the block requests; and how often callers
waited for a block, and the longest wait for an ID (from wanting it to
having it): the first block of each life is always waited for, a young
process waits on a few more of its small first blocks, and none while
draining.

SCRIPTS are not simulated: a real Sequence (threads) and a real
AsyncSequence take 1, 100, 10,000 and 1,000,000 IDs as fast as they can
from a MemoryBackend answering after SCRIPT_LATENCY, then close: IDs
skipped and requests per run.

DRAIN STALLS are measured, not simulated: a real Sequence and AsyncSequence
draw STALL_RATE IDs/s, paced, from a MemoryBackend answering after
STALL_LATENCY (50 ms), with blocks of 5 s; they drain, and every next_id()
of the next STALL_DRAINING seconds is timed (goal: none over 100 ms).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import random
import time
from array import array
from dataclasses import dataclass
from typing import Any

from bench.client import _latencies, _percentiles
from bench.common import machine_facts, write_results
from bench.scale import Lognormal, Simulation, _NoBackend
from idblocks import AsyncSequence, Sequence
from idblocks.sizing import DRAIN_RUNWAY, INITIAL_BLOCK, prefetch_tail, smoothed_latency
from idblocks.testing import AsyncMemoryBackend, MemoryBackend

SEED = 20261201
TODAY, NEW = "today", "new"
LATENCY = Lognormal(0.037, 0.35)
DAY = 86_400.0
DEPLOYS = 10  # a day
FLEET_PROCESSES = 20
FLEET_RATE = 1_000.0  # IDs/s, the whole fleet's
DEREGISTRATION = 10.0  # s a load balancer takes to take a process out of service
LIFE_SPREAD = 60.0  # s: each process's life is 2.4 h, give or take this
RESTART_RATES = (1_000.0, 1.0)
DRAIN_WINDOWS = (0.0, 1.0, 2.0, 5.0, 8.0, 10.0, 30.0, 60.0)
SCRIPT_COUNTS = (1, 100, 10_000, 1_000_000)
SCRIPT_LATENCY = 0.037
STALL_RATE = 10_000  # IDs/s
STALL_LATENCY = 0.050
STALL_WARM = 3.0  # s before drain()
STALL_DRAINING = 9.0  # s timed after it: longer than the 7.5 s of IDs held at most
GOAL_STALL_MS = 100.0


def sizing_sequence(
    policy: str, sequence: type[Sequence] | type[AsyncSequence] = Sequence, backend: Any = None
) -> Any:
    """A Sequence (or AsyncSequence) sizing as ``policy`` says: the client's
    defaults, or idblocks 1.0's (a first block of 100, no start bound)."""
    backend = _NoBackend() if backend is None else backend
    if policy == NEW:
        return sequence(backend, "gaps")
    seq = sequence(backend, "gaps", initial_block=100)
    seq.sizer.bounded = False
    return seq


# -- a process, simulated ------------------------------------------------------------


@dataclass
class Stop:
    """What a process's stop cost, and what its life asked."""

    skipped: float
    requests: int
    waits: int  # times callers waited for a block, over its life
    longest_wait: float  # s, over its life
    longest_wait_draining: float  # s, after drain()


class Process:
    """One Sequence's blocks, drawn at ``rate`` IDs/s from time 0 until
    ``stop``, draining from ``drain_at`` (None: never). The Sequence sizes
    every request (``_size_for``, with what is held), its prefetch_tail
    decides when the next is asked for, and its sizer is told what it is
    told in a Sequence: demand, blocks landing and running out, drain."""

    def __init__(
        self,
        sim: Simulation,
        policy: str,
        rate: float,
        stop: float,
        drain_at: float | None,
        rng: random.Random,
    ) -> None:
        self.sim, self.rate, self.rng = sim, rate, rng
        self.seq = sizing_sequence(policy)
        self.sizer = self.seq.sizer
        self.latency: float | None = None  # of block requests, as the Sequence averages it
        self.size = 0  # the current block, while it lasts
        self.started = 0.0  # when it started, with how many of it drawn at once
        self.drawn = 0.0
        self.ready: collections.deque[int] = collections.deque()
        self.pending: int | None = None  # on the network
        self.stalled, self.stalled_since = True, 0.0  # demand waits from then
        self.block = 0  # which block the events scheduled belong to
        self.requests = self.waits = 0
        self.longest_wait = self.longest_wait_draining = 0.0
        self.result: Stop | None = None
        sim.at(0.0, self._exhausted, 0)
        if drain_at is not None:
            sim.at(drain_at, self.seq.drain)
        sim.at(stop, self._stop)

    def _held(self) -> float:
        left = 0.0
        if self.size:
            left = max(0.0, self.size - self.drawn - self.rate * (self.sim.now - self.started))
        return left + sum(self.ready)

    def _start(self, size: int) -> None:
        now = self.sim.now
        tail = prefetch_tail(
            size, self.seq.prefetch_at, self.sizer.rate, self.latency, self.sizer.young_tail()
        )
        drawn = 0.0
        if self.stalled:
            # The callers waiting since stalled_since are served first.
            waiting = self.rate * (now - self.stalled_since)
            drawn = min(waiting, float(size))
            wait = now - self.stalled_since
            self.waits += 1
            self.longest_wait = max(self.longest_wait, wait)
            if self.sizer.draining:
                self.longest_wait_draining = max(self.longest_wait_draining, wait)
            self.stalled_since += drawn / self.rate
            self.stalled = drawn < waiting
        self.block += 1
        self.size, self.started, self.drawn = size, now, drawn
        split = size - tail
        if drawn >= split:
            self._prefetch(self.block)
        else:
            self.sim.at(now + (split - drawn) / self.rate, self._prefetch, self.block)
        self.sim.at(now + (size - drawn) / self.rate, self._exhausted, self.block)

    def _prefetch(self, block: int) -> None:
        if self.result is None and block == self.block and not (self.ready or self.pending):
            self._fetch()

    def _exhausted(self, block: int) -> None:
        if self.result is not None or block != self.block:
            return
        now = self.sim.now
        if self.size:
            self.sizer.block_finished(self.size, now)
            self.size = 0
        if self.ready:
            self._start(self.ready.popleft())
            return
        if not self.stalled:
            self.stalled, self.stalled_since = True, now
        if self.pending is None:
            self._fetch()

    def _fetch(self) -> None:
        now = self.sim.now
        # The Sequence's own choice of size (with need 1, as next_id asks).
        self.pending = self.seq._size_for(1, held=math.ceil(self._held()))
        self.sizer.demand_from(now)
        self.sim.at(now + LATENCY.draw(self.rng), self._landed, self.pending, now)

    def _landed(self, size: int, sent: float) -> None:
        self.pending = None
        self.requests += 1
        self.sizer.landed(size)
        self.latency = smoothed_latency(self.latency, self.sim.now - sent)
        if self.result is not None:
            return  # after the stop: close waited for it, and counted it
        self.ready.append(size)
        if self.stalled and not self.size:
            self._start(self.ready.popleft())

    def _stop(self) -> None:
        # Close counts what is held and the block on the network, if any.
        skipped = self._held() + (self.pending or 0)
        self.result = Stop(skipped, self.requests, self.waits, self.longest_wait, self.longest_wait_draining)

    def finish(self) -> Stop:
        assert self.result is not None
        # The request close waited for is one of the life's requests.
        return dataclasses.replace(self.result, requests=self.requests)


def lives(policy: str, rate: float, count: int, *, drain_for: float | None, seed: str) -> dict[str, float]:
    """``count`` lives of a process at ``rate`` IDs/s, each DAY / DEPLOYS
    long give or take LIFE_SPREAD, draining ``drain_for`` seconds before
    its stop (None: never): the IDs skipped and requests, in all."""
    rng = random.Random(f"{SEED}/{seed}/{policy}/{rate}/{drain_for}")
    skipped = requests = waits = 0.0
    longest = longest_draining = 0.0
    for _ in range(count):
        stop = DAY / DEPLOYS + rng.uniform(-LIFE_SPREAD, LIFE_SPREAD)
        sim = Simulation()
        process = Process(sim, policy, rate, stop, None if drain_for is None else stop - drain_for, rng)
        sim.run(stop + 60.0)
        result = process.finish()
        skipped += result.skipped
        requests += result.requests
        waits += result.waits
        longest = max(longest, result.longest_wait)
        longest_draining = max(longest_draining, result.longest_wait_draining)
    return {
        "skipped": round(skipped),
        "requests": round(requests),
        "waits": round(waits),
        "longest_wait_ms": round(1000 * longest, 1),
        "longest_wait_draining_ms": round(1000 * longest_draining, 1),
    }


def fleet() -> dict[str, Any]:
    """FLEET_PROCESSES processes, DEPLOYS rolling deploys a day: today, the
    new policy, and the new policy draining for DEREGISTRATION seconds."""
    rate = FLEET_RATE / FLEET_PROCESSES
    runs = {"today": (TODAY, None), "new": (NEW, None), "new_drain": (NEW, DEREGISTRATION)}
    results: dict[str, Any] = {}
    for name, (policy, drain_for) in runs.items():
        day = lives(policy, rate, FLEET_PROCESSES * DEPLOYS, drain_for=drain_for, seed="fleet")
        results[f"fleet.{name}.skipped_per_day"] = day["skipped"]
        results[f"fleet.{name}.requests_per_day"] = day["requests"]
        results[f"fleet.{name}.waits_per_day"] = day["waits"]
        results[f"fleet.{name}.longest_wait_ms"] = day["longest_wait_ms"]
        if drain_for is not None:
            results[f"fleet.{name}.longest_wait_draining_ms"] = day["longest_wait_draining_ms"]
    results["fleet.drain_saves_pct"] = round(
        100.0 * (1 - results["fleet.new_drain.skipped_per_day"] / results["fleet.today.skipped_per_day"]), 1
    )
    return results


def restarts() -> dict[str, Any]:
    """One process restarted DEPLOYS times a day, at each of RESTART_RATES."""
    results: dict[str, Any] = {}
    for rate in RESTART_RATES:
        runs = {"today": (TODAY, None), "new": (NEW, None), "new_drain": (NEW, DEREGISTRATION)}
        for name, (policy, drain_for) in runs.items():
            day = lives(policy, rate, DEPLOYS, drain_for=drain_for, seed="restart")
            results[f"restart_{rate:g}.{name}.skipped_per_day"] = day["skipped"]
            results[f"restart_{rate:g}.{name}.requests_per_day"] = day["requests"]
            results[f"restart_{rate:g}.{name}.waits_per_day"] = day["waits"]
            results[f"restart_{rate:g}.{name}.longest_wait_ms"] = day["longest_wait_ms"]
    return results


def drain_windows() -> dict[str, Any]:
    """What a stop skips (per stop, the mean of a day's) when the process
    serves on for each of DRAIN_WINDOWS seconds after drain(), beside not
    draining, for a fleet process and for the one process at 1,000 IDs/s."""
    results: dict[str, Any] = {}
    for label, rate, count in (
        ("fleet_process", FLEET_RATE / FLEET_PROCESSES, 40),
        ("one_process", 1_000.0, 40),
    ):
        never = lives(NEW, rate, count, drain_for=None, seed="windows")
        results[f"drain_window.{label}.never.skipped_per_stop"] = round(never["skipped"] / count, 1)
        for seconds in DRAIN_WINDOWS:
            day = lives(NEW, rate, count, drain_for=seconds, seed="windows")
            results[f"drain_window.{label}.{seconds:g}s.skipped_per_stop"] = round(day["skipped"] / count, 1)
    return results


# -- scripts, and stalls while draining: the real clients ---------------------------------


def scripts() -> dict[str, Any]:
    """A Sequence and an AsyncSequence taking each of SCRIPT_COUNTS IDs as
    fast as they can, then closing: skipped and requests, per policy."""
    results: dict[str, Any] = {}
    for policy in (TODAY, NEW):
        for count in SCRIPT_COUNTS:
            backend = MemoryBackend(latency=SCRIPT_LATENCY)
            seq = sizing_sequence(policy, Sequence, backend)
            for _ in range(count):
                seq.next_id()
            results[f"script_{count}.{policy}.skipped"] = seq.close()
            results[f"script_{count}.{policy}.requests"] = backend.calls

            async def run(count: int = count, policy: str = policy) -> tuple[int, int]:
                backend = AsyncMemoryBackend(latency=SCRIPT_LATENCY)
                seq = sizing_sequence(policy, AsyncSequence, backend)
                for _ in range(count):
                    await seq.next_id()
                return await seq.aclose(), backend.calls

            skipped, requests = asyncio.run(run())
            results[f"script_{count}.{policy}.async_skipped"] = skipped
            results[f"script_{count}.{policy}.async_requests"] = requests
    return results


async def _async_latencies(seq: AsyncSequence, seconds: float) -> array:
    """Time every ``await seq.next_id()`` of ``seconds``, paced to STALL_RATE
    in chunks of 1 ms (the sleep between them is not timed)."""
    took = array("q")
    clock = time.perf_counter_ns
    loop = asyncio.get_running_loop()
    started = loop.time()
    chunk = STALL_RATE // 1000
    for first in range(0, int(seconds * STALL_RATE), chunk):
        await asyncio.sleep(max(started + first / STALL_RATE - loop.time(), 0))
        for _ in range(chunk):
            before = clock()
            await seq.next_id()
            took.append(clock() - before)
    return took


def drain_stalls() -> dict[str, Any]:
    """next_id() while draining at a steady rate, for threads and asyncio."""
    results: dict[str, Any] = {}
    backend = MemoryBackend(latency=STALL_LATENCY)
    seq = Sequence(backend, "drain-stall", initial_block=int(5 * STALL_RATE))
    _latencies(seq, int(STALL_WARM * STALL_RATE), STALL_RATE)
    seq.drain()
    figures = _percentiles(_latencies(seq, int(STALL_DRAINING * STALL_RATE), STALL_RATE))
    results["drain_stall.threads.p999_us"] = round(figures["p999_us"], 2)
    results["drain_stall.threads.max_ms"] = round(figures["max_us"] / 1000, 2)
    results["drain_stall.threads.unused_at_close"] = seq.close()
    results["drain_stall.threads.requests"] = backend.calls

    async def run() -> tuple[dict[str, float], int, int]:
        backend = AsyncMemoryBackend(latency=STALL_LATENCY)
        seq = AsyncSequence(backend, "drain-stall", initial_block=int(5 * STALL_RATE))
        await _async_latencies(seq, STALL_WARM)
        seq.drain()
        figures = _percentiles(await _async_latencies(seq, STALL_DRAINING))
        return figures, await seq.aclose(), backend.calls

    figures, unused, requests = asyncio.run(run())
    results["drain_stall.async.p999_us"] = round(figures["p999_us"], 2)
    results["drain_stall.async.max_ms"] = round(figures["max_us"] / 1000, 2)
    results["drain_stall.async.unused_at_close"] = unused
    results["drain_stall.async.requests"] = requests
    results["goal_drain_no_stall_over_100ms_met"] = (
        results["drain_stall.threads.max_ms"] < GOAL_STALL_MS
        and results["drain_stall.async.max_ms"] < GOAL_STALL_MS
    )
    return results


def model_facts() -> dict[str, Any]:
    return {
        "seed": SEED,
        "model.latency_median_ms": LATENCY.median * 1000,
        "model.latency_sigma": LATENCY.sigma,
        "model.deploys_per_day": DEPLOYS,
        "model.fleet_processes": FLEET_PROCESSES,
        "model.fleet_rate_per_s": FLEET_RATE,
        "model.deregistration_s": DEREGISTRATION,
        "model.drain_runway_s": DRAIN_RUNWAY,
        "model.initial_block_new": INITIAL_BLOCK,
        "model.initial_block_today": 100,
        "model.script_latency_ms": SCRIPT_LATENCY * 1000,
        "model.stall_rate_per_s": STALL_RATE,
        "model.stall_latency_ms": STALL_LATENCY * 1000,
    }


def main() -> dict[str, Any]:
    results: dict[str, Any] = dict(machine_facts()) | model_facts()
    for name, part in (
        ("fleet", fleet),
        ("restarts", restarts),
        ("drain windows", drain_windows),
        ("scripts", scripts),
        ("drain stalls", drain_stalls),
    ):
        started = time.perf_counter()
        figures = part()
        print(f"gaps: {name} ({time.perf_counter() - started:.1f} s)", flush=True)
        for key, value in figures.items():
            print(
                f"  {key}: {value:,}" if isinstance(value, int | float) else f"  {key}: {value}", flush=True
            )
        results |= figures
    write_results("gaps", results)
    return results


if __name__ == "__main__":
    main()
