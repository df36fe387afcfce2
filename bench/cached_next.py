"""Cached next: the IDs a counter skips and the block requests it costs,
the policy before (every block the counter's whole cache, dropped unused
when it expires) beside the one now (blocks sized to what each environment
serves, an expired block kept while its write is the counter's last), in
one run.

    python -m bench cached_next

A counter with cache 1,000 is called through `next` at 0.2, 2 and 200
requests a second per function environment, by one environment alone and by
ten at once. Requests arrive at random (Poisson, seeded), for an hour of
simulated time; the day's figures are the hour's times 24. Lambda recycles
environments when it chooses; here each is taken to be recycled once an
hour, leaving what it holds then as a gap: on average, what it held over
the hour (a single moment's holding would be one draw of anything from 0
to a block). Each environment runs the
service's own policy, NextCache (layers/core/idblocks_core/logic/
next_cache.py), on the simulated clock, over one counter item shared by all,
which answers as the store's writes do: a block of the size asked (refused
above the cache setting, naming it), and ``keep`` true while the block's
write is the item's last. The policy before is the same NextCache over the
item as it answered then: every write took the cache setting whatever was
asked, and no block was ever kept.

Figures, per scenario and policy: IDs served, IDs skipped (the blocks'
IDs dropped unused when they expired, and what the environments hold when
recycled) and block requests (every write to the item: blocks taken,
refused and, for the policy now, kept), per day; and the share of IDs
skipped.

Writes bench/results/cached_next.json.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common import machine_facts, use_core_layer, write_results

use_core_layer()

from idblocks_core.domain.errors import CacheBelowCount  # noqa: E402
from idblocks_core.domain.model import Block  # noqa: E402
from idblocks_core.logic.next_cache import NextCache  # noqa: E402

SEED = 20261127
CACHE = 1_000
RATES = (0.2, 2.0, 200.0)  # requests/s per environment
ENVIRONMENTS = (1, 10)
SIMULATED_SECONDS = 3_600.0
PER_DAY = 86_400 / SIMULATED_SECONDS
RECYCLES_PER_DAY = 24  # each environment's
COUNTER = "members"
POLICIES = ("before", "now")


class Item:
    """The counter's item as the store's writes see it, shared by every
    environment. ``whole_cache``: as the write answered before, a block of
    the cache setting whatever was asked."""

    def __init__(self, cache: int, *, whole_cache: bool) -> None:
        self.cache = cache
        self.whole_cache = whole_cache
        self.hwm = 0
        self.token = ""
        self.writes = 0
        self.kept = 0

    def reserve(self, name: str, count: int) -> Block:
        self.writes += 1
        size = self.cache if self.whole_cache else count
        if size > self.cache:
            raise CacheBelowCount(name, size, self.cache)
        self.hwm += size
        self.token = f"write-{self.writes}"
        return Block(self.hwm - size + 1, self.hwm, token=self.token, cache=self.cache)

    def keep(self, name: str, end: int, token: str) -> bool:
        if self.whole_cache:  # no block was kept before: no such write
            return False
        self.writes += 1
        still = self.hwm == end and self.token == token
        self.kept += still
        return still


@dataclass(frozen=True)
class Figures:
    """One simulated run: IDs served, IDs dropped when their block expired
    (the high-water mark less what was served and what is still held), the
    IDs the environments held on average, and writes to the item."""

    served: int
    dropped: int
    average_held: float
    block_requests: int
    kept: int

    def per_day(self) -> dict[str, float]:
        served = self.served * PER_DAY
        skipped = self.dropped * PER_DAY + self.average_held * RECYCLES_PER_DAY
        return {
            "ids_served_per_day": round(served),
            "ids_skipped_per_day": round(skipped),
            "ids_skipped_when_recycled_per_day": round(self.average_held * RECYCLES_PER_DAY),
            "block_requests_per_day": round(self.block_requests * PER_DAY),
            "blocks_kept_per_day": round(self.kept * PER_DAY),
            "skipped_pct": round(100 * skipped / (skipped + served), 2),
        }


def simulate(
    rate: float, environments: int, policy: str, seed: int = SEED, seconds: float = SIMULATED_SECONDS
) -> Figures:
    """``environments`` environments, each called ``rate`` times a second
    for ``seconds``, under ``policy`` ("before" or "now")."""
    rng = random.Random(f"{seed}/{rate}/{environments}")  # the same arrivals for both policies
    item = Item(CACHE, whole_cache=policy == "before")
    now = [0.0]
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731 - the policies' shared simulated clock
    caches = [NextCache(item.reserve, item.keep, clock=clock) for _ in range(environments)]
    arrivals = [(rng.expovariate(rate), index) for index in range(environments)]
    heapq.heapify(arrivals)
    served = 0
    # What each environment holds changes only when it is called: held[i]
    # since since[i], summed over time into held_seconds.
    held, since, held_seconds = [0] * environments, [0.0] * environments, 0.0
    while arrivals[0][0] < seconds:
        at, index = arrivals[0]
        now[0] = at
        caches[index].next_id(COUNTER)
        served += 1
        held_seconds += held[index] * (at - since[index])
        held[index], since[index] = caches[index].held(COUNTER), at
        heapq.heapreplace(arrivals, (at + rng.expovariate(rate), index))
    held_seconds += sum(h * (seconds - s) for h, s in zip(held, since, strict=True))
    return Figures(
        served=served,
        dropped=item.hwm - served - sum(held),
        average_held=held_seconds / seconds,
        block_requests=item.writes,
        kept=item.kept,
    )


def run_all() -> dict[str, Any]:
    results: dict[str, Any] = {}
    for environments in ENVIRONMENTS:
        for rate in RATES:
            row = []
            for policy in POLICIES:
                started = time.perf_counter()
                figures = simulate(rate, environments, policy).per_day()
                results |= {f"{environments}env.{rate:g}rps.{policy}.{k}": v for k, v in figures.items()}
                row.append(
                    f"{policy}: {figures['ids_skipped_per_day']:>11,} skipped, "
                    f"{figures['block_requests_per_day']:>9,} block requests "
                    f"({time.perf_counter() - started:.1f} s)"
                )
            print(f"cached_next: {environments:>2} x {rate:>5g}/s per day  " + "  |  ".join(row), flush=True)
    return results


def main() -> dict[str, Any]:
    results: dict[str, Any] = dict(machine_facts())
    results |= {
        "seed": SEED,
        "cache": CACHE,
        "simulated_seconds": SIMULATED_SECONDS,
        "rates_per_environment": ", ".join(f"{rate:g}" for rate in RATES),
        "environments": ", ".join(str(n) for n in ENVIRONMENTS),
    }
    results |= run_all()
    write_results("cached_next", results)
    return results


if __name__ == "__main__":
    main()
