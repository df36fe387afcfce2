"""Cached next through the handlers, on moto's in-process DynamoDB: the
cache setting (create, PUT, GET, list), next answered from blocks that grow
up to it, shrinking near max, regions, Idempotency-Key, expiry after PUT
and DELETE, an expired block kept while its write is the counter's last,
and its metrics."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.exceptions import ReadTimeoutError

from idblocks_core.core import core, reseed_after_restore
from idblocks_core.domain.errors import CacheBelowCount
from idblocks_core.logic.next_cache import NextCache
from idblocks_core.observability import metrics
from tests.conftest import TABLE_NAMES, scan_all

KEY = {"Idempotency-Key": "member-signup-7"}
WINDOW = timedelta(hours=1)


def item(dynamodb, name: str) -> dict:
    [found] = [i for i in scan_all(dynamodb, "CountersTable") if i["name"]["S"] == name]
    return found


def hwm(dynamodb, name: str) -> int:
    return int(item(dynamodb, name)["hwm"]["N"])


def next_ids(api, name: str, n: int, **kwargs) -> list[int]:
    replies = [api.call("next-post", name=name, **kwargs) for _ in range(n)]
    assert [r.status for r in replies] == [200] * n, [r.body for r in replies if r.status != 200]
    return [r.body["id"] for r in replies]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_clock_for_next() -> FakeClock:
    """The core's allocator, with its cache on a clock the test moves (and
    that stands still: requests come faster than it tells apart, so each
    block is 32 times the one before, up to the cache setting)."""
    clock = FakeClock()
    allocator = core().allocator
    allocator.next_cache = NextCache(
        allocator._reserve_for_next, allocator.store.still_last_allocation, clock=clock
    )
    return clock


def another_environment() -> NextCache:
    """A second environment of the same function, on the same clock."""
    allocator = core().allocator
    first = allocator.next_cache
    allocator.next_cache = NextCache(
        allocator._reserve_for_next, allocator.store.still_last_allocation, clock=first._clock
    )
    return first


def test_the_cache_setting_is_created_shown_listed_and_put(api):
    created = api.call("admin-create", body={"name": "members", "cache": 100})
    assert (created.status, created.body["cache"]) == (201, 100)
    assert api.call("admin-get", name="members").body["cache"] == 100
    assert api.call("admin-create", body={"name": "plain"}).body["cache"] == 1
    listed = {c["name"]: c["cache"] for c in api.call("admin-list").body["counters"]}
    assert listed == {"members": 100, "plain": 1}
    put = api.call("admin-set", name="members", body={"cache": 7})
    assert (put.status, put.body["cache"], put.body["next"]) == (200, 7, 1)
    both = api.call("admin-set", name="members", body={"next": 50, "cache": 1_000_000})
    assert (both.body["cache"], both.body["next"]) == (1_000_000, 50)


@pytest.mark.parametrize("cache", [0, -1, 1_000_001, "5", 2.5, True])
def test_a_bad_cache_is_400_invalid_cache_and_changes_nothing(api, table_snapshot, cache):
    api.call("admin-create", body={"name": "members"})
    before = table_snapshot()
    created = api.call("admin-create", body={"name": "other", "cache": cache})
    put = api.call("admin-set", name="members", body={"cache": cache})
    assert (created.status, created.error_code) == (400, "invalid_cache")
    assert (put.status, put.error_code) == (400, "invalid_cache")
    assert table_snapshot() == before


def test_uncached_next_is_one_write_per_id_as_before(api, dynamodb):
    """The default, cache 1: the item moves with every ID; nothing is held."""
    api.call("admin-create", body={"name": "orders"})
    for expected in (1, 2, 3):
        assert next_ids(api, "orders", 1) == [expected]
        assert hwm(dynamodb, "orders") == expected
    assert core().allocator.next_cache.held("orders") == 0


def test_cached_next_grows_its_blocks_to_the_cache_and_serves_the_rest_from_memory(api, dynamodb):
    fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 250) == list(range(1, 251))
    assert hwm(dynamodb, "members") == 333  # blocks of 1, 32, 100, 100 and 100
    assert api.call("admin-get", name="members").body["next"] == 334
    assert core().allocator.next_cache.held("members") == 83


def test_near_max_the_block_shrinks_so_all_ten_ids_are_handed_out(api, dynamodb):
    """max 10, cache 4: blocks of 1, 4, 4 and then the 1 left; then 409."""
    fake_clock_for_next()
    api.call("admin-create", body={"name": "tickets", "max": 10, "cache": 4})
    assert next_ids(api, "tickets", 10) == list(range(1, 11))
    refused = api.call("next-post", name="tickets")
    assert (refused.status, refused.error_code) == (409, "counter_exhausted")
    assert "cannot hand out 1 more ID" in refused.body["error"]["message"]
    assert hwm(dynamodb, "tickets") == 10


def test_with_regions_cached_blocks_stay_in_the_residue(api, lambda_env, dynamodb):
    """Region 1 of 3: blocks of cache * 3 on the item, IDs 1 mod 3, and the
    last block shrinks to the residue's IDs left below max."""
    lambda_env(REGION_COUNT="3", REGION_INDEX="1")
    api.call("admin-create", body={"name": "eu", "max": 40, "cache": 5})
    assert item(dynamodb, "eu")["cache_span"]["N"] == "15"
    assert next_ids(api, "eu", 14) == list(range(1, 41, 3))
    assert api.call("next-post", name="eu").error_code == "counter_exhausted"


def test_batch_ignores_the_cache(api, dynamodb):
    api.call("admin-create", body={"name": "members", "cache": 100})
    reply = api.call("batch", name="members", body={"count": 3})
    assert (reply.body["start"], reply.body["end"]) == (1, 3)
    assert hwm(dynamodb, "members") == 3


def test_an_item_from_before_the_setting_reads_as_cache_1(api, dynamodb):
    api.call("admin-create", body={"name": "old"})
    dynamodb.update_item(
        TableName=TABLE_NAMES["CountersTable"],
        Key={"name": {"S": "old"}},
        UpdateExpression="REMOVE #c, #s",
        ExpressionAttributeNames={"#c": "cache", "#s": "cache_span"},
    )
    assert api.call("admin-get", name="old").body["cache"] == 1
    assert next_ids(api, "old", 2) == [1, 2]
    assert hwm(dynamodb, "old") == 2


def test_a_put_of_cache_governs_the_next_block(api, dynamodb):
    """Lowered: the environment asks for the 3 it last saw, the write is
    refused naming 2, and the block is 2. Raised: that write shows 10, and
    the block after it grows to 10."""
    fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 3})
    assert next_ids(api, "members", 4) == [1, 2, 3, 4]  # blocks of 1 and 3, drained
    api.call("admin-set", name="members", body={"cache": 2})
    assert next_ids(api, "members", 2) == [5, 6]
    assert hwm(dynamodb, "members") == 6
    api.call("admin-set", name="members", body={"cache": 10})
    assert next_ids(api, "members", 3) == [7, 8, 9]
    assert hwm(dynamodb, "members") == 18  # a block of 2 that saw 10, then one of 10


def test_an_item_from_before_the_setting_refuses_a_block_of_more_than_one(api, dynamodb):
    """Without cache_span the write of a block of 5 is refused, naming cache
    1; a block of one is taken."""
    api.call("admin-create", body={"name": "old", "cache": 100})
    dynamodb.update_item(
        TableName=TABLE_NAMES["CountersTable"],
        Key={"name": {"S": "old"}},
        UpdateExpression="REMOVE #c, #s",
        ExpressionAttributeNames={"#c": "cache", "#s": "cache_span"},
    )
    store = core().store
    with pytest.raises(CacheBelowCount) as refused:
        store.reserve_block("old", 5, "t1", WINDOW, cached_next=True)
    assert refused.value.cache == 1
    assert hwm(dynamodb, "old") == 0
    block = store.reserve_block("old", 1, "t2", WINDOW, cached_next=True)
    assert (block.start, block.end, block.cache) == (1, 1, 1)


def test_a_put_of_next_is_seen_once_the_held_block_expires(api, dynamodb):
    """Cached IDs below the new next are still served (they are unique: the
    item never moved back), until the block's life ends; then next obeys."""
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]  # holds 3..33
    assert api.call("admin-set", name="members", body={"next": 1000}).status == 200
    clock.now = 59.9
    assert next_ids(api, "members", 1) == [3]
    clock.now = 60.0
    assert next_ids(api, "members", 1) == [1000]


def test_a_deleted_counter_serves_no_longer_than_a_blocks_life(api, lambda_env):
    lambda_env(AUTO_CREATE_COUNTERS="false")
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    next_ids(api, "members", 2)
    assert api.call("admin-delete", name="members").status == 204
    clock.now = 59.9
    assert next_ids(api, "members", 1) == [3]
    clock.now = 60.0
    assert api.call("next-post", name="members").error_code == "counter_not_found"


def test_a_keyed_next_is_answered_the_same_id_again(api, dynamodb):
    """The record keeps the ID the cache served; its retry gets that ID, not
    the next cached one, and other callers go on after it."""
    fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    first = next_ids(api, "members", 1, headers=KEY)
    again = next_ids(api, "members", 1, headers=KEY)
    other = next_ids(api, "members", 1, headers={"Idempotency-Key": "member-signup-8"})
    later = next_ids(api, "members", 1, headers={"Idempotency-Key": "member-signup-9"})
    assert first == again == [1]
    assert other + later == [2, 3]
    assert hwm(dynamodb, "members") == 33  # blocks of 1 and 32


def test_a_keyed_retry_that_finds_its_block_written_elsewhere_serves_only_its_own_id(api, dynamodb):
    """The first attempt took a block of 32 with the key's token and was
    answered 2, but its record is gone (the request failed afterwards). Its
    retry, in an environment with nothing held, asks for a block of one
    with the same key: it must find that write, take it for the block of 32
    it was (not the one ID a write of its own size would have taken: 9,
    which the first environment still serves) and answer 2 again, without
    holding 3..33."""
    fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 1) == [1]
    allocator = core().allocator
    request = {"caller": "anonymous", "counter": "members", "key": "k-1", "count": 1}
    try:
        assert allocator._hand_out_once(request, "next")["start"] == 2
        first_environment = another_environment()
        assert allocator._hand_out_once(request, "next")["start"] == 2
    finally:
        # Called outside a handler, nothing flushed what these recorded.
        metrics.clear_metrics()
    assert allocator.next_cache.held("members") == 0
    assert next_ids(api, "members", 1) == [34]
    assert first_environment.held("members") == 31


def test_cached_next_reports_ids_from_memory_and_blocks_taken_without_the_name(api, capsys):
    api.call("admin-create", body={"name": "members", "cache": 3})
    metrics.clear_metrics()
    capsys.readouterr()
    next_ids(api, "members", 4)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [line.get("CacheBlocksTaken") for line in lines] == [None, [1.0], None, None]
    assert [line.get("IdsServedFromCache") for line in lines] == [None, None, [1.0], [1.0]]
    assert [line.get("IdsAllocated") for line in lines] == [[1.0], [3.0], None, None]
    for line in lines:
        for directive in line["_aws"]["CloudWatchMetrics"]:
            assert all("counter" not in dimensions for dimensions in directive["Dimensions"])


def test_a_restored_snapshot_holds_no_cached_block(api):
    """Every environment restored from one snapshot is a copy of its memory:
    a block held there would be served by each copy."""
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]  # holds 3..33
    reseed_after_restore()
    assert core().allocator.next_cache.held("members") == 0
    assert next_ids(api, "members", 1) == [34]


class LosesAnAllocationAnswer:
    """A DynamoDB client whose ``nth`` allocation write is applied but whose
    answer is lost on the way back, as a timeout after the commit would."""

    def __init__(self, client, nth: int) -> None:
        self._client = client
        self.allocations = 0
        self.nth = nth
        self.lost = 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def update_item(self, **kwargs):
        answer = self._client.update_item(**kwargs)
        if "#alloc_at = :now" in kwargs.get("UpdateExpression", ""):  # only allocations set it
            self.allocations += 1
            if self.allocations == self.nth:
                self.lost += 1
                raise ReadTimeoutError(endpoint_url="http://dynamodb.test")
        return answer


def test_a_cached_block_whose_answer_was_lost_is_recovered_not_taken_twice(api, dynamodb):
    """The store resends the write of the block of 32; the item bears the
    write's token, so the resend returns the block the first attempt took
    instead of taking a second one."""
    fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    store = core().store
    lossy = LosesAnAllocationAnswer(store.client, nth=2)
    store.client = lossy
    assert next_ids(api, "members", 3) == [1, 2, 3]
    assert lossy.lost == 1
    assert hwm(dynamodb, "members") == 33


# -- an expired block kept while its write is the counter's last ---------------------------


def test_an_expired_block_is_served_on_while_its_write_is_the_counters_last(api, dynamodb, logged):
    """A minute on, nothing written since: one conditional write that
    changes nothing, and the rest of the block is served; a minute after
    that question, it is asked again."""
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]  # holds 3..33
    before = item(dynamodb, "members")
    logged()
    clock.now = 60.0
    assert next_ids(api, "members", 2) == [3, 4]
    assert item(dynamodb, "members") == before
    records = [line for line in logged() if line.get("message") == "allocation"]
    assert [(r["served_from"], r["dynamodb_calls"]) for r in records] == [("memory", 1), ("memory", 0)]
    clock.now = 119.9
    assert next_ids(api, "members", 1) == [5]
    assert [r["dynamodb_calls"] for r in logged() if r.get("message") == "allocation"] == [0]
    clock.now = 120.0
    assert next_ids(api, "members", 1) == [6]
    assert [r["dynamodb_calls"] for r in logged() if r.get("message") == "allocation"] == [1]


def test_after_another_environments_write_an_expired_block_is_dropped(api, dynamodb):
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]  # holds 3..33
    first_environment = another_environment()
    assert next_ids(api, "members", 1) == [34]
    core().allocator.next_cache = first_environment
    clock.now = 60.0
    assert next_ids(api, "members", 1) == [35]  # 3..33 are a gap
    assert first_environment.held("members") == 0


@pytest.mark.parametrize("body", [{"cache": 100}, {"next": 34}], ids=["same-cache", "same-next"])
def test_after_an_admin_put_an_expired_block_is_dropped_even_if_nothing_changed(api, dynamodb, body):
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]  # holds 3..33
    assert api.call("admin-set", name="members", body=body).status == 200
    clock.now = 60.0
    assert next_ids(api, "members", 1) == [34]


def test_a_put_after_a_block_was_kept_is_seen_within_a_minute(api, dynamodb):
    """Kept at t = 60, a PUT of next at t = 70: IDs below the new next are
    served until t = 120, a minute after the question, then next obeys."""
    clock = fake_clock_for_next()
    api.call("admin-create", body={"name": "members", "cache": 100})
    assert next_ids(api, "members", 2) == [1, 2]
    clock.now = 60.0
    assert next_ids(api, "members", 1) == [3]
    clock.now = 70.0
    assert api.call("admin-set", name="members", body={"next": 1000}).status == 200
    clock.now = 119.9
    assert next_ids(api, "members", 1) == [4]
    clock.now = 120.0
    assert next_ids(api, "members", 1) == [1000]
