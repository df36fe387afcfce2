"""Admin safety: moving a counter back, deleting and re-creating it, letting
next meet a deleted name (refused until an admin re-creates it), exhausting max, and admin PUTs racing
allocations. Through two dev servers sharing one DynamoDB, over HTTP, with
allocations running all the while. None may hand out an ID twice."""

from __future__ import annotations

import random
import threading

import pytest
import requests

from tests.support.cluster import cluster


@pytest.fixture(scope="module")
def dev():
    with cluster(servers=2) as running:
        yield running


class Workers:
    """Threads whose failures fail the test (an assert in a thread alone would not)."""

    def __init__(self, target, args_list) -> None:
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(target, args)) for args in args_list]

    def _run(self, target, args) -> None:
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self.errors.append(exc)

    def start(self) -> Workers:
        for thread in self.threads:
            thread.start()
        return self

    def join(self) -> None:
        for thread in self.threads:
            thread.join()
        assert self.errors == []


def allocate_until(stop: threading.Event, urls: list[str], counter: str, seed: int, got: list) -> None:
    rng = random.Random(seed)
    session = requests.Session()
    while not stop.is_set():
        url = rng.choice(urls)
        if rng.random() < 0.3:
            reply = session.post(f"{url}/counters/{counter}/next", timeout=30)
            if reply.status_code == 200:
                got.append((reply.json()["id"], reply.json()["id"]))
        else:
            reply = session.post(
                f"{url}/counters/{counter}/batch", json={"count": rng.randint(1, 30)}, timeout=30
            )
            if reply.status_code == 200:
                got.append((reply.json()["start"], reply.json()["end"]))
        assert reply.status_code in (200, 404, 409), reply.text


def assert_no_id_twice(blocks: list[tuple[int, int]]) -> int:
    ids = [i for start, end in blocks for i in range(start, end + 1)]
    assert len(ids) == len(set(ids)), "an ID was handed out twice"
    return len(ids)


# What each admin change may answer while allocations race it. A counter
# the admin saw a moment ago still exists (only the admin deletes), and the
# first allocations ran before any change, so the high-water mark is >= 1.
ALLOWED = {
    "raise": {200, 409},  # 409: allocations overtook the new value
    "raise-missing": {404, 200, 409},  # an allocation may re-create it meanwhile
    "back": {409},  # never moved back
    "back-missing": {404, 409},
    "delete": {204},
    "delete-missing": {404, 204},  # as for raise: re-created meanwhile, then deleted
    "create": {201, 409},
    "create_low": {409},  # exists, or below the high-water mark
    "create_high": {201, 409},
}
# Outcomes a run must show, or it proved little: a counter raised, one
# refused a move back, one deleted, one refused a revival below its mark.
MUST_SEE = {("raise", 200), ("back", 409), ("delete", 204), ("create_low", 409)}


def test_admin_changes_racing_allocations_never_repeat_an_id(dev):
    """Given allocations running on two dev servers, when an admin raises,
    tries to move back, deletes and re-creates the counter at random, then
    each change gets the answer its state allows, and no ID is handed out
    twice."""
    counter, urls = "raced", dev.urls
    got: list[tuple[int, int]] = []
    stop = threading.Event()
    workers = Workers(allocate_until, [(stop, urls, counter, seed, got) for seed in range(6)]).start()
    admin, rng, outcomes = requests.Session(), random.Random(42), []
    try:
        for _ in range(600):  # the first allocations, before any change
            if got or workers.errors:
                break
            stop.wait(0.05)
        assert got, "no allocation ran"
        for _ in range(60):
            url = rng.choice(urls)
            action = rng.choice(["raise", "back", "delete", "create", "create_low", "create_high"])
            state = admin.get(f"{url}/admin/counters/{counter}", timeout=30)
            assert state.status_code in (200, 404), state.text
            current = state.json()["next"] if state.status_code == 200 else None
            target = f"{url}/admin/counters/{counter}"
            if action == "raise":
                reply = admin.put(target, json={"next": (current or 1) + rng.randint(1000, 5000)}, timeout=30)
            elif action == "back":
                reply = admin.put(
                    target, json={"next": rng.randint(1, current - 1) if current else 1}, timeout=30
                )
            elif action == "delete":
                reply = admin.delete(target, timeout=30)
            elif action == "create":
                reply = admin.post(f"{url}/admin/counters", json={"name": counter}, timeout=30)
            elif action == "create_low":
                reply = admin.post(f"{url}/admin/counters", json={"name": counter, "start": 1}, timeout=30)
            else:
                reply = admin.post(
                    f"{url}/admin/counters",
                    json={"name": counter, "start": (current or 1) + 10_000},
                    timeout=30,
                )
            if current is None and action in ("raise", "back", "delete"):
                action += "-missing"
            assert reply.status_code in ALLOWED[action], (action, current, reply.status_code, reply.text)
            outcomes.append((action, reply.status_code))
    finally:
        stop.set()
        workers.join()
    assert_no_id_twice(got)
    assert len(got) >= 50  # allocations really ran alongside the admin changes
    final = requests.get(f"{urls[0]}/admin/counters/{counter}", timeout=30)
    if final.status_code == 200:
        assert max(end for _, end in got) < final.json()["next"]
    assert set(outcomes) >= MUST_SEE, sorted(set(outcomes))


def test_exhausting_max_under_concurrency_hands_out_exactly_up_to_max(dev):
    counter, urls, top = "bounded", dev.urls, 3000
    assert (
        requests.post(f"{urls[0]}/admin/counters", json={"name": counter, "max": top}, timeout=30).status_code
        == 201
    )
    got: list[tuple[int, int]] = []

    def drain(seed: int) -> None:
        rng, session, count = random.Random(seed), requests.Session(), 64
        while count >= 1:
            reply = session.post(
                f"{rng.choice(urls)}/counters/{counter}/batch", json={"count": count}, timeout=30
            )
            if reply.status_code == 200:
                got.append((reply.json()["start"], reply.json()["end"]))
                continue
            assert (reply.status_code, reply.json()["error"]["code"]) == (409, "counter_exhausted")
            count //= 2  # fewer left than asked: ask for less, down to one

    Workers(drain, [(seed,) for seed in range(8)]).start().join()
    assert assert_no_id_twice(got) == top  # every ID up to max, none beyond, none twice
    assert max(end for _, end in got) == top


def test_a_deleted_name_stays_deleted_for_clients_and_an_admin_continues_above_it(dev):
    url = dev.urls[0]
    first = requests.post(f"{url}/counters/reborn/batch", json={"count": 100}, timeout=30).json()
    assert requests.delete(f"{url}/admin/counters/reborn", timeout=30).status_code == 204
    refused = requests.post(f"{dev.urls[1]}/counters/reborn/next", timeout=30)
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "counter_not_found")
    made = requests.post(f"{dev.urls[1]}/admin/counters", json={"name": "reborn"}, timeout=30).json()
    assert made["next"] == first["end"] + 1
    assert requests.post(f"{url}/counters/reborn/next", timeout=30).json()["id"] == first["end"] + 1
