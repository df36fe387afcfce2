"""Concurrency: client processes x threads mixing next and batch on a few
shared counters, through several dev servers (as several Lambda containers)
over real HTTP, sharing one DynamoDB (moto in server mode).

Checked: no ID is handed out twice, every range lies in [1, high-water mark],
and the ranges tile that interval but for the IDs the store logged as a
possible gap: with no faults injected, nothing is lost unless DynamoDB's
answer to a write came later than the store waits for it (a machine too busy
for the embedded DynamoDB) and another allocation overtook the retry, and
then the store says so. `pytest --long` runs it twenty times longer.
"""

from __future__ import annotations

from tests.support.cluster import cluster, hammer
from tests.support.ledger import check_ranges, logged_gaps

COUNTERS = ["orders", "invoices", "members"]


def test_no_id_twice_and_none_lost_under_concurrency(tmp_path, long_run):
    requests_per_thread = 40 * (20 if long_run else 1)
    with cluster(servers=4) as dev:
        seen = hammer(
            dev.urls, COUNTERS, tmp_path,
            processes=4, seed=7, threads=8, requests=requests_per_thread, key_rate=0.3, repeat_rate=0.3,
        )  # fmt: skip
        high_water = {counter: dev.high_water(counter) for counter in COUNTERS}
    explained = logged_gaps(line for server in dev.servers for line in server.output)
    assert seen["problems"] == []
    assert set(seen["statuses"]) == {"200"}
    handed_out = sum(end - start + 1 for _, start, end, _ in set(seen["allocations"]))
    assert handed_out >= 50_000, handed_out
    gaps = check_ranges(seen["allocations"], high_water, must_tile=False)
    assert {counter: min(gaps[counter], explained.get(counter, 0)) for counter in COUNTERS} == gaps, explained
    assert sum(high_water.values()) == handed_out + sum(gaps.values())
