"""Client benchmarks: local rate, stalls at block boundaries, and requests
under steady pressure. Every comparison is measured side by side in this run.

    python -m bench client      (make bench runs all benchmarks)

Writes bench/results/client.json (a flat object) and bench/results/client.png.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import threading
import time
from array import array
from pathlib import Path

from bench.common import RESULTS, machine_facts, write_results
from idblocks import HttpBackend, Sequence
from idblocks.testing import MemoryBackend

RATE_CALLS = 3_000_000
RATE_ROUNDS = 5
STALL_CALLS = 2_000_000
STALL_LATENCY = 0.050
STALL_BLOCK = 50_000  # 40 refills over the run
STALL_PACE = 400_000  # IDs/s: a block lasts 125 ms, a request takes 50
PRESSURE_RATE = 100_000  # IDs/s
PRESSURE_SECONDS = 10


# -- 1. local rate ---------------------------------------------------------------


def _bare_rate(calls: int) -> float:
    counter = itertools.count()
    draw = next
    started = time.perf_counter()
    for _ in range(calls):
        draw(counter)
    return calls / (time.perf_counter() - started)


def _sequence_rate(calls: int, step: int = 1) -> float:
    """``step`` 3: the blocks one region of three hands out."""
    seq = Sequence(MemoryBackend(step=step), "rate", block_size=1_000_000)
    draw = seq.next_id
    started = time.perf_counter()
    for _ in range(calls):
        draw()
    rate = calls / (time.perf_counter() - started)
    seq.close()
    return rate


def _sequence_rate_threads(calls: int, threads: int) -> float:
    seq = Sequence(MemoryBackend(), "rate", block_size=1_000_000)
    per_thread = calls // threads
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        draw = seq.next_id
        barrier.wait()
        for _ in range(per_thread):
            draw()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    rate = per_thread * threads / (time.perf_counter() - started)
    seq.close()
    return rate


def local_rate() -> dict[str, float]:
    """Interleaved rounds, so the machine's noise hits both sides alike; the
    median round is reported."""
    bare, ours, ours3, ours8 = [], [], [], []
    for _ in range(RATE_ROUNDS):
        bare.append(_bare_rate(RATE_CALLS))
        ours.append(_sequence_rate(RATE_CALLS))
        ours3.append(_sequence_rate(RATE_CALLS, step=3))
        ours8.append(_sequence_rate_threads(RATE_CALLS, 8))
    ratios = [o / b for o, b in zip(ours, bare, strict=True)]
    ratios3 = [o / b for o, b in zip(ours3, bare, strict=True)]
    return {
        "bare_rate": round(statistics.median(bare)),
        "local_rate_1t": round(statistics.median(ours)),
        "local_rate_1t_step3": round(statistics.median(ours3)),
        "local_rate_8t": round(statistics.median(ours8)),
        "ratio_to_bare": round(statistics.median(ratios), 3),
        "ratio_to_bare_step3": round(statistics.median(ratios3), 3),
    }


# -- 2. stalls ---------------------------------------------------------------------


def _latencies(seq: Sequence, calls: int, rate: float | None = None) -> array:
    """Time every next_id() call. With ``rate``, calls are paced to that many
    per second, in chunks with a sleep between them (the sleep is not timed)."""
    took = array("q", bytes(8 * calls))
    clock = time.perf_counter_ns
    draw = seq.next_id
    chunk = 500
    started = time.perf_counter()
    for first in range(0, calls, chunk):
        if rate is not None:
            due = started + first / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        for i in range(first, min(calls, first + chunk)):
            before = clock()
            draw()
            took[i] = clock() - before
    return took


def _percentiles(took: array) -> dict[str, float]:
    ordered = sorted(took)
    n = len(ordered)
    return {
        "p50_us": ordered[n // 2] / 1000,
        "p999_us": ordered[min(n - 1, int(n * 0.999))] / 1000,
        "max_us": ordered[-1] / 1000,
        "over_1ms": sum(1 for t in ordered if t > 1_000_000),
    }


def stalls() -> dict[str, float]:
    """STALL_CALLS calls against a backend taking STALL_LATENCY per block.

    The main runs consume at STALL_PACE IDs/s, where a STALL_BLOCK block
    lasts longer than a request takes, so prefetch can hide the network. The
    "_unpaced" runs consume as fast as the loop goes: then STALL_BLOCK blocks
    run out faster than one request a time can bring them, with or without
    prefetch, which is what adaptive sizing is for."""
    results: dict[str, float] = {}
    runs = {
        "": ({"block_size": STALL_BLOCK, "prefetch": True}, STALL_PACE),
        "_no_prefetch": ({"block_size": STALL_BLOCK, "prefetch": False}, STALL_PACE),
        "_unpaced": ({"block_size": STALL_BLOCK, "prefetch": True}, None),
        "_unpaced_adaptive": ({"prefetch": True, "initial_block": STALL_BLOCK}, None),
    }
    for suffix, (options, pace) in runs.items():
        backend = MemoryBackend(latency=STALL_LATENCY)
        seq = Sequence(backend, "stall", **options)
        seq.next_id()  # the first block is always waited for; measure what follows
        figures = _percentiles(_latencies(seq, STALL_CALLS, pace))
        seq.close()
        results[f"stall_p50_us{suffix}"] = round(figures["p50_us"], 2)
        results[f"stall_p999_us{suffix}"] = round(figures["p999_us"], 2)
        results[f"stall_max_us{suffix}"] = round(figures["max_us"], 2)
        results[f"stall_over_1ms{suffix}"] = figures["over_1ms"]
        results[f"stall_requests{suffix}"] = backend.calls
    return results


# -- 3. pressure ---------------------------------------------------------------------


class _VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pressure_run(**options: object) -> tuple[int, int]:
    """Consume PRESSURE_RATE IDs/s for PRESSURE_SECONDS on a virtual clock, so
    the run is exact and fast. The backend answers at once and blocks are
    fetched when needed (prefetch off): latency and prefetch change when a
    block arrives, not how many are asked for; prefetch would hold at most
    one more block at the end."""
    clock = _VirtualClock()
    backend = MemoryBackend()
    seq = Sequence(backend, "pressure", clock=clock, prefetch=False, **options)
    tick = 0.001
    per_tick = int(PRESSURE_RATE * tick)
    draw = seq.next_id
    for _ in range(int(PRESSURE_SECONDS / tick)):
        for _ in range(per_tick):
            draw()
        clock.now += tick
    unused = seq.close()
    return backend.calls, unused


def pressure() -> dict[str, int]:
    results: dict[str, int] = {}
    runs: dict[str, dict[str, object]] = {
        "adaptive": {},
        "fixed_1": {"block_size": 1},
        "fixed_100": {"block_size": 100},
        "fixed_10000": {"block_size": 10_000},
    }
    for name, options in runs.items():
        requests, unused = _pressure_run(**options)
        results[f"pressure_requests_{name}"] = requests
        results[f"pressure_unused_{name}"] = unused
    return results


# -- against the dev server -------------------------------------------------------------


def devserver_run(ids: int = 300_000) -> dict[str, float]:
    from devserver.process import DevServer

    state = Path(tempfile.mkdtemp()) / "state.json"
    with DevServer("--fresh", state_file=state) as dev:
        backend = HttpBackend(dev.url)
        seq = Sequence(backend, "bench")
        seq.next_id()
        took = _latencies(seq, ids)
        started = time.perf_counter()
        for _ in range(ids):
            seq.next_id()
        rate = ids / (time.perf_counter() - started)
        requests = seq.requests
        unused = seq.close()
        figures = _percentiles(took)
    return {
        "devserver_rate": round(rate),
        "devserver_requests": requests,
        "devserver_unused": unused,
        "devserver_p999_us": round(figures["p999_us"], 2),
        "devserver_max_us": round(figures["max_us"], 2),
    }


def plot(results: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, stall, press) = plt.subplots(1, 3, figsize=(15, 4.5))
    names = ["bare next(count)", "next_id 1 thread", "next_id 8 threads"]
    values = [results["bare_rate"], results["local_rate_1t"], results["local_rate_8t"]]
    rate.bar(names, [v / 1e6 for v in values], color=["grey", "tab:blue", "tab:cyan"])
    rate.set_ylabel("million IDs/s")
    rate.set_title(f"Local rate (ratio to bare {results['ratio_to_bare']})")
    rate.tick_params(axis="x", labelsize=8)

    labels = ["p50", "p99.9", "max"]
    width = 0.2
    for offset, (suffix, label) in enumerate(
        [
            ("", "prefetch"),
            ("_no_prefetch", "no prefetch"),
            ("_unpaced", "prefetch, unpaced"),
            ("_unpaced_adaptive", "adaptive, unpaced"),
        ]
    ):
        keys = [f"stall_p50_us{suffix}", f"stall_p999_us{suffix}", f"stall_max_us{suffix}"]
        stall.bar([i + offset * width for i in range(3)], [results[k] for k in keys], width, label=label)
    stall.set_xticks([i + 1.5 * width for i in range(3)], labels)
    stall.set_yscale("log")
    stall.set_ylabel("next_id() latency, µs (log)")
    stall.set_title(
        f"next_id(): {STALL_CALLS:,} calls, {int(STALL_LATENCY * 1000)} ms per request, "
        f"{STALL_PACE // 1000}k IDs/s",
        fontsize=10,
    )
    stall.legend(fontsize=8)

    runs = ["adaptive", "fixed_1", "fixed_100", "fixed_10000"]
    x = range(len(runs))
    requests = [max(1, results[f"pressure_requests_{r}"]) for r in runs]
    unused = [max(1, results[f"pressure_unused_{r}"]) for r in runs]  # log scale: 0 shows as 1
    press.bar([i - 0.2 for i in x], requests, 0.4, label="block requests")
    press.bar([i + 0.2 for i in x], unused, 0.4, label="IDs unused at the end")
    press.set_xticks(list(x), runs)
    press.set_yscale("log")
    press.set_title(f"{PRESSURE_RATE:,} IDs/s for {PRESSURE_SECONDS} s")
    press.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> dict[str, float]:
    results: dict[str, float | str] = dict(machine_facts())
    print("client: local rate ...", flush=True)
    results |= local_rate()
    print("client: stalls ...", flush=True)
    results |= stalls()
    print("client: pressure ...", flush=True)
    results |= pressure()
    print("client: against the dev server ...", flush=True)
    results |= devserver_run()
    write_results("client", results)
    plot(results, RESULTS / "client.png")  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


if __name__ == "__main__":
    main()
