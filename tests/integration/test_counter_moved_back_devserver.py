"""A counter restored from a backup, over real HTTP: a dev server (one
function environment) on the embedded DynamoDB, whose endpoint the test
writes to directly as a restore does. After the counter's item is put back
to an earlier copy, next, batch and cached next each answer 500
counter_moved_back, no ID handed out before comes back, and the item stays
as the restore left it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devserver.process import DevServer
from localrun.dynamodb import LOCAL_CREDENTIALS, client
from tests.support.cluster import cluster
from tests.support.restore import backup_of, put_back

ROUTES = {"batch": ("batch", 1), "next": ("next", 1), "cached next": ("next", 4)}


@pytest.fixture(scope="module")
def restorable() -> Iterator[tuple[DevServer, Any]]:
    """One dev server for the module, and a client of its DynamoDB."""
    with cluster(servers=1) as running:
        yield running.servers[0], client(running.dynamodb.endpoint, credentials=LOCAL_CREDENTIALS)


def ask(dev: DevServer, route: str, name: str) -> requests.Response:
    return dev.post(f"/counters/{name}/{route}", {"count": 3} if route == "batch" else None)


def ids_of(reply: requests.Response) -> list[int]:
    body = reply.json()
    return [body["id"]] if "id" in body else list(range(body["start"], body["end"] + 1, body["step"]))


def take(dev: DevServer, route: str, name: str, times: int) -> list[int]:
    handed: list[int] = []
    for _ in range(times):
        reply = ask(dev, route, name)
        assert reply.status_code == 200, reply.text
        handed += ids_of(reply)
    return handed


@pytest.mark.parametrize("way", ROUTES)
def test_a_counter_put_back_to_its_backup_is_refused_and_nothing_comes_back(restorable, way):
    dev, dynamodb = restorable
    route, cache = ROUTES[way]
    name = f"moved-back-{way.replace(' ', '-')}"  # the embedded DynamoDB is shared by the test process
    assert dev.post("/admin/counters", {"name": name, "cache": cache}).status_code == 201
    # Given IDs handed out before and after a backup of the counter's item
    handed = take(dev, route, name, 1)
    backup = backup_of(dynamodb, name)
    handed += take(dev, route, name, 4)
    # When the backup is put back, as a restore writes it
    put_back(dynamodb, backup)
    # Then the next answers are refusals: cached next first serves what it
    # holds in memory, IDs it took before the restore and never handed out
    # (at most cache - 1; none when its block was used up, as it is unless
    # the machine was slow enough to shrink the blocks)
    answers = [ask(dev, route, name) for _ in range(cache + 1)]
    served = [i for reply in answers if reply.status_code == 200 for i in ids_of(reply)]
    refused = [reply for reply in answers if reply.status_code != 200]
    assert len(served) <= cache - 1
    assert refused, "the counter that moved back was never refused"
    assert [(r.status_code, r.json()["error"]["code"]) for r in refused] == [
        (500, "counter_moved_back")
    ] * len(refused)
    assert all(reply.status_code != 200 for reply in answers[answers.index(refused[0]) :])
    assert name in refused[0].json()["error"]["message"]
    # and nothing handed out before comes back, nor did the counter move
    assert not set(served) & set(handed)
    assert backup_of(dynamodb, name) == backup
