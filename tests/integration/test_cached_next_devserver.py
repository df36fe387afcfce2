"""Cached next against the dev server over real HTTP (one dev server is one
function environment): how far a counter moves for the IDs it serves."""

from __future__ import annotations

import time

import pytest
import requests

from devserver.process import DevServer
from tests.support.ledger import next_of


def next_ids(dev: DevServer, name: str, calls: int, apart: float) -> list[int]:
    ids = []
    for call in range(calls):
        if call:
            time.sleep(apart)  # pacing only: what is checked holds at any speed
        reply = dev.post(f"/counters/{name}/next")
        assert reply.status_code == 200, reply.text
        ids.append(reply.json()["id"])
    return ids


def test_six_calls_a_quarter_second_apart_move_a_counter_with_cache_1000_by_at_most_106(dev):
    """A slow caller of a counter with cache 1,000: the environment takes one
    ID, then a block sized to its rate (at most eight), not a thousand."""
    created = dev.post("/admin/counters", {"name": "slow-members", "cache": 1000})
    assert created.status_code == 201, created.text
    assert next_ids(dev, "slow-members", 6, 0.25) == [1, 2, 3, 4, 5, 6]
    assert next_of(dev, "slow-members") - 1 <= 106


@pytest.mark.parametrize("cache", [1, 3, 1000])
def test_a_busy_caller_is_served_every_id_once_in_blocks_that_grow_to_the_cache(dev, cache):
    """Back-to-back calls: every ID once, in order (one environment), and
    the counter ahead of them by less than one block of the cache."""
    name = f"busy-{cache}"
    assert dev.post("/admin/counters", {"name": name, "cache": cache}).status_code == 201
    with requests.Session() as session:
        ids = [session.post(f"{dev.url}/counters/{name}/next", timeout=30).json()["id"] for _ in range(300)]
    assert ids == list(range(1, 301))
    assert 300 <= next_of(dev, name) - 1 < 300 + cache
