"""A counter whose item moved back (a table restored from a backup, an item
lowered by hand) is refused by a function environment that already took IDs
beyond where it now stands: 500 counter_moved_back, nothing handed out, the
item left as it is, a log line and the CounterMovedBack metric.

On moto's in-process DynamoDB, where the core is one function environment.
A restore is played by a PutItem of an earlier copy of the counter's item,
which is what a restored table holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idblocks_core.core import core, reseed_after_restore
from idblocks_core.logic.taken_marks import TakenMarks
from tests.conftest import TABLE_NAMES, scan_all
from tests.support.restore import backup_of, put_back
from tests.unit.test_cached_next import fake_clock_for_next, hwm

MOVED_BACK = (500, "counter_moved_back")
KEY = {"Idempotency-Key": "refund-run-9"}


def lower_by_hand(dynamodb: Any, name: str, last_id: int) -> None:
    """An operator's edit of the high-water mark alone, in the console."""
    dynamodb.update_item(
        TableName=TABLE_NAMES["CountersTable"],
        Key={"name": {"S": name}},
        UpdateExpression="SET hwm = :h",
        ExpressionAttributeValues={":h": {"N": str(last_id)}},
    )


def batch(api: Any, name: str, count: int, **kwargs: Any) -> Any:
    return api.call("batch", name=name, body={"count": count}, **kwargs)


def block_of(reply: Any) -> tuple[int, int]:
    assert reply.status == 200, reply.body
    return reply.body["start"], reply.body["end"]


def next_id(api: Any, name: str, **kwargs: Any) -> int:
    reply = api.call("next-post", name=name, **kwargs)
    assert reply.status == 200, reply.body
    return reply.body["id"]


def records(logged: Any) -> list[dict[str, Any]]:
    return [line for line in logged() if line.get("message") == "allocation"]


def test_batch_from_a_counter_put_back_to_an_earlier_copy_is_refused_and_hands_out_nothing(
    api, dynamodb, table_snapshot, logged
):
    # Given a counter that handed out 1..10, restored to its copy from after 1..5
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    assert block_of(batch(api, "orders", 5)) == (1, 5)
    backup = backup_of(dynamodb, "orders")
    assert block_of(batch(api, "orders", 5)) == (6, 10)
    put_back(dynamodb, backup)
    before = table_snapshot()
    logged()
    # When the environment that handed out 6..10 is asked for more
    refused = batch(api, "orders", 5)
    # Then it answers 500 counter_moved_back naming the counter, the block and its mark
    assert (refused.status, refused.error_code) == MOVED_BACK
    message = refused.body["error"]["message"]
    assert "'orders'" in message
    assert "6..10" in message
    assert "at or below 10," in message
    # and hands out nothing: the item is as restored, no allocation is recorded
    assert table_snapshot() == before
    assert records(logged) == []


def test_uncached_next_from_a_counter_put_back_is_refused_and_hands_out_nothing(
    api, dynamodb, table_snapshot
):
    # Given a counter with cache 1 that handed out 1, 2, 3, restored to its copy from after 1
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    assert next_id(api, "orders") == 1
    backup = backup_of(dynamodb, "orders")
    assert [next_id(api, "orders"), next_id(api, "orders")] == [2, 3]
    put_back(dynamodb, backup)
    before = table_snapshot()
    # When next is asked for again, twice
    answers = [api.call("next-post", name="orders") for _ in range(2)]
    # Then both are refused, and the counter stays where the restore left it
    assert [(reply.status, reply.error_code) for reply in answers] == [MOVED_BACK] * 2
    assert "hand out ID 2, at or below 3," in answers[0].body["error"]["message"]
    assert table_snapshot() == before


def test_a_block_taken_for_cached_next_from_a_counter_put_back_is_refused(api, dynamodb, table_snapshot):
    # Given a counter with cache 4 whose environment took blocks [1] and [2..5]
    # and served them all, restored to its copy from after the first block
    fake_clock_for_next()
    assert api.call("admin-create", body={"name": "members", "cache": 4}).status == 201
    assert next_id(api, "members") == 1
    backup = backup_of(dynamodb, "members")
    assert [next_id(api, "members") for _ in range(4)] == [2, 3, 4, 5]
    assert hwm(dynamodb, "members") == 5
    put_back(dynamodb, backup)
    before = table_snapshot()
    # When next needs a new block
    refused = api.call("next-post", name="members")
    # Then the block 2..5 is refused, not taken, not held and not served
    assert (refused.status, refused.error_code) == MOVED_BACK
    assert "2..5" in refused.body["error"]["message"]
    assert table_snapshot() == before
    assert core().allocator.next_cache.held("members") == 0
    assert (api.call("next-post", name="members").error_code, hwm(dynamodb, "members")) == (
        "counter_moved_back",
        1,
    )


def test_a_held_block_dropped_after_the_counter_was_lowered_is_followed_by_a_refusal(
    api, dynamodb, table_snapshot
):
    """The whole block the environment took is its mark, not only the IDs it
    served: the counter lowered by hand to 10, between the 3 served and the
    33 taken, is refused once the held block expires and its keep check finds
    the counter changed."""
    # Given an environment holding 4..33 of a counter with cache 100, lowered to 10
    clock = fake_clock_for_next()
    assert api.call("admin-create", body={"name": "members", "cache": 100}).status == 201
    assert [next_id(api, "members") for _ in range(3)] == [1, 2, 3]
    assert core().allocator.next_cache.held("members") == 30
    lower_by_hand(dynamodb, "members", 10)
    # When the block has expired and next is asked for
    clock.now = 60.0
    before = table_snapshot()
    refused = api.call("next-post", name="members")
    # Then the held IDs are not served and the block 11.. is refused
    assert (refused.status, refused.error_code) == MOVED_BACK
    assert "at or below 33," in refused.body["error"]["message"]
    assert table_snapshot() == before


@pytest.mark.parametrize("cache", [1, 4])
def test_a_keyed_next_refused_is_refused_again_on_retry_and_leaves_no_record(api, dynamodb, cache):
    """The refusal is a condition of the write: nothing is written, so a
    retry of the key has no write of its own to be answered from, and no
    idempotency record holds a block."""
    # Given an environment that served 1..5 from a counter restored to its copy from after 1
    fake_clock_for_next()
    assert api.call("admin-create", body={"name": "members", "cache": cache}).status == 201
    assert next_id(api, "members") == 1
    backup = backup_of(dynamodb, "members")
    assert [next_id(api, "members") for _ in range(4)] == [2, 3, 4, 5]
    put_back(dynamodb, backup)
    # When a keyed next is refused and retried with its key
    answers = [api.call("next-post", name="members", headers=KEY) for _ in range(2)]
    # Then both are refused and nothing of the key is kept
    assert [(reply.status, reply.error_code) for reply in answers] == [MOVED_BACK] * 2
    assert scan_all(dynamodb, "IdempotencyTable") == []
    # and once an operator moved the counter above 5, the same key gets a fresh ID above it
    assert api.call("admin-set", name="members", body={"next": 6}).status == 200
    assert next_id(api, "members", headers=KEY) == 6


def test_a_keyed_batch_refused_never_gets_the_refused_block_on_retry(api, dynamodb):
    # Given a counter that handed out 1..10, restored to its copy from after 1..5
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    assert block_of(batch(api, "orders", 5)) == (1, 5)
    backup = backup_of(dynamodb, "orders")
    assert block_of(batch(api, "orders", 5)) == (6, 10)
    put_back(dynamodb, backup)
    # When a keyed batch is refused and retried with the same key
    first = batch(api, "orders", 5, headers=KEY)
    again = batch(api, "orders", 5, headers=KEY)
    # Then the retry is refused too: the counter never moved, no record was kept
    assert [(first.status, first.error_code), (again.status, again.error_code)] == [MOVED_BACK] * 2
    assert hwm(dynamodb, "orders") == 5
    assert scan_all(dynamodb, "IdempotencyTable") == []
    # and once the counter is moved above 10, the key takes a fresh block above it
    assert api.call("admin-set", name="orders", body={"next": 11}).status == 200
    assert block_of(batch(api, "orders", 5, headers=KEY)) == (11, 15)


def emitted(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    lines = capsys.readouterr().out.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{") and '"_aws"' in line]


def test_each_refusal_is_logged_and_counted_once_by_route(api, dynamodb, logged, capsys):
    # Given a counter restored to a copy from before this environment's last block
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    assert block_of(batch(api, "orders", 5)) == (1, 5)
    backup = backup_of(dynamodb, "orders")
    assert next_id(api, "orders") == 6
    put_back(dynamodb, backup)
    logged()
    capsys.readouterr()
    # When batch and next are refused
    assert (batch(api, "orders", 3).error_code, api.call("next-post", name="orders").error_code) == (
        "counter_moved_back",
        "counter_moved_back",
    )
    # Then each logs the counter, the block it would have handed out and the mark
    lines = [line for line in logged() if line["message"] == "counter moved back: allocation refused"]
    assert [
        (line["level"], line["counter"], line["first_id"], line["last_id"], line["taken_up_to"])
        for line in lines
    ] == [
        ("ERROR", "orders", 6, 8, 6),
        ("ERROR", "orders", 6, 6, 6),
    ]
    # and counts CounterMovedBack once, by route, the counter's name only in the line
    counted = [line for line in emitted(capsys) if "CounterMovedBack" in line]
    assert [(line["route"], line["CounterMovedBack"], line["counter"]) for line in counted] == [
        ("batch", [1], "orders"),
        ("next", [1], "orders"),
    ]
    for line in counted:
        [directive] = line["_aws"]["CloudWatchMetrics"]
        assert [sorted(dimensions) for dimensions in directive["Dimensions"]] == [["route", "service"]]
        units = {metric["Name"]: metric.get("Unit") for metric in directive["Metrics"]}
        assert units["CounterMovedBack"] == "Count"


def test_with_regions_a_counter_lowered_by_one_step_is_refused_and_one_at_its_mark_is_not(
    api, dynamodb, lambda_env
):
    """Region 1 of 3: every ID is 1 mod 3, the mark too. The counter put back
    one step (its last ID 7 where this environment took 10) would hand out 10
    again; put back where it was, it goes on."""
    lambda_env(REGION_COUNT="3", REGION_INDEX="1")
    assert api.call("admin-create", body={"name": "eu"}).status == 201
    assert block_of(batch(api, "eu", 4)) == (1, 10)
    at_mark = backup_of(dynamodb, "eu")
    lower_by_hand(dynamodb, "eu", 7)
    refused = batch(api, "eu", 2)
    assert (refused.status, refused.error_code) == MOVED_BACK
    assert "10..13" in refused.body["error"]["message"]
    put_back(dynamodb, at_mark)
    assert block_of(batch(api, "eu", 2)) == (13, 16)


def test_writes_answered_out_of_order_neither_refuse_each_other_nor_lower_the_mark(
    api, dynamodb, monkeypatch
):
    """Threads of one environment (the dev server's): a write applied first
    but answered last is not refused by the mark the later one raised, and
    leaves the mark at the higher block's end."""
    assert api.call("admin-create", body={"name": "orders"}).status == 201
    allocator = core().allocator
    reserve = allocator.store.reserve_block
    overtaken: list[Any] = []

    def answered_after_another_write(*args: Any, **kwargs: Any) -> Any:
        block = reserve(*args, **kwargs)
        if not overtaken:  # another thread's write is applied and answered meanwhile
            overtaken.append(None)
            overtaken[0] = allocator.take_block("orders", 5)
        return block

    monkeypatch.setattr(allocator.store, "reserve_block", answered_after_another_write)
    first = allocator.take_block("orders", 5)
    monkeypatch.undo()
    assert [(first.start, first.end), (overtaken[0].start, overtaken[0].end)] == [(1, 5), (6, 10)]
    # The mark is 10: the counter lowered to 7 would hand out 8..10 again.
    lower_by_hand(dynamodb, "orders", 7)
    refused = batch(api, "orders", 1)
    assert (refused.status, refused.error_code) == MOVED_BACK


def test_marks_are_bounded_and_forget_the_counter_least_recently_taken_from():
    marks = TakenMarks(limit=2)
    marks.took("a", 5)
    marks.took("b", 7)
    marks.took("a", 9)
    marks.took("c", 1)  # a third counter: b, taken from longest ago, goes
    assert [marks.mark(name) for name in "abc"] == [9, None, 1]
    marks.took("a", 3)  # a write answered late never lowers a mark
    assert (marks.mark("a"), len(marks)) == (9, 2)


def test_a_snapstart_restore_empties_the_marks(api):
    """Every copy restored from one snapshot starts from its memory: none
    keeps a mark of what was taken before it (the marks are empty at init,
    so a snapshot holds none anyway)."""
    assert len(core().allocator.taken) == 0
    assert block_of(batch(api, "orders", 5)) == (1, 5)
    assert core().allocator.taken.mark("orders") == 5
    reseed_after_restore()
    assert len(core().allocator.taken) == 0
