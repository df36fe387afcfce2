"""`idblocks recover` in-process: the plan (idblocks.recovery) from what the
stack has, the other table and the records; carrying it out through the
admin function itself (tests.support.local_backend, on moto), after a
restore made as DynamoDB makes one (the counters table put back as it was
earlier); and reading the other table (idblocks.counters_table)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idblocks import recovery
from idblocks.counters_table import StoredCounter, TableError, read_counters
from idblocks.errors import ServiceUnavailable
from idblocks.recovery import HereCounter, Step, plan
from tests.conftest import TABLE_NAMES, reset_core_caches, scan_table
from tests.support.local_backend import LocalBackend

COUNTERS = TABLE_NAMES["CountersTable"]
OTHER = "counters-before-the-restore"
BIG = 2**53 - 1


def live(name: str, next_id: int | None, max_id: int = BIG) -> HereCounter:
    return HereCounter(name, next_id, max_id)


def stored(name: str, hwm: int, **more: Any) -> StoredCounter:
    return StoredCounter(name, hwm, more.pop("max", BIG), **more)


def only(plans, name):
    (found,) = [p for p in plans if p.name == name]
    return found


# -- the plan -----------------------------------------------------------------------


def test_a_live_counter_not_above_what_was_handed_out_is_set_above_it():
    # Given a counter whose next (11) the other table's mark (40) passed
    [orders] = plan({"orders": live("orders", 11)}, {"orders": stored("orders", 40)}, None)
    # Then one step sets next just above it
    assert (orders.handed_out, orders.steps) == (40, [Step("set", next=41)])


def test_a_counter_whose_next_is_the_highest_id_handed_out_is_set_above_it():
    """Its next was handed out: it must not be handed out again."""
    [orders] = plan({"orders": live("orders", 40)}, None, {"orders": 40})
    assert orders.steps == [Step("set", next=41)]


def test_a_counter_already_above_is_left_as_it_is():
    [orders] = plan({"orders": live("orders", 41)}, {"orders": stored("orders", 40)}, {"orders": 40})
    assert orders.steps == []
    assert "above every ID handed out" in orders.why


def test_the_higher_of_the_table_and_the_records_decides():
    plans = plan(
        {"a": live("a", 1), "b": live("b", 1)},
        {"a": stored("a", 50), "b": stored("b", 7)},
        {"a": 10, "b": 70},
    )
    assert [(p.name, p.handed_out, p.steps) for p in plans] == [
        ("a", 50, [Step("set", next=51)]),
        ("b", 70, [Step("set", next=71)]),
    ]


def test_a_counter_deleted_in_the_other_table_is_raised_then_deleted_here():
    [orders] = plan({"orders": live("orders", 5)}, {"orders": stored("orders", 30, deleted=True)}, None)
    assert orders.steps == [Step("set", next=31), Step("delete")]
    [above] = plan({"orders": live("orders", 99)}, {"orders": stored("orders", 30, deleted=True)}, None)
    assert above.steps == [Step("delete")]


def test_a_counter_deleted_here_stays_deleted_with_its_kept_mark_raised():
    here = {"orders": HereCounter("orders", 6, BIG, deleted=True)}
    [orders] = plan(here, {"orders": stored("orders", 30)}, {"orders": 44})
    assert orders.steps == [Step("set", next=45)]
    [above] = plan(here, {"orders": stored("orders", 5, deleted=True)}, None)
    assert above.steps == []


def test_a_counter_only_in_the_other_table_is_created_above_its_mark_as_it_was_there():
    other = {"orders": stored("orders", 30, max=1000, cache=50), "gone": stored("gone", 8, deleted=True)}
    orders, gone = only(plan({}, other, None), "orders"), only(plan({}, other, None), "gone")
    assert orders.steps == [Step("create", start=31, max=1000, cache=50)]
    assert gone.steps == [Step("create", start=9, max=BIG, cache=1), Step("delete")]


def test_a_counter_only_in_the_records_is_created_above_them():
    [orders] = plan({}, None, {"orders": 12})
    assert orders.steps == [Step("create", start=13, max=BIG)]
    [big] = plan({}, None, {"big": 2**60})
    assert big.steps == [Step("create", start=2**60 + 1, max=2**60 + 1)]


def test_a_counter_whose_max_is_not_above_what_was_handed_out_is_exhausted():
    """Any ID it could still hand out may have been handed out."""
    [orders] = plan({"orders": live("orders", 5, max_id=20)}, {"orders": stored("orders", 25, max=30)}, None)
    assert orders.steps == [Step("set", next=21)]
    assert "exhausted" in orders.why


def test_an_exhausted_counter_needs_nothing_unless_deleted_there():
    [orders] = plan({"orders": live("orders", None, max_id=20)}, {"orders": stored("orders", 99)}, None)
    assert orders.steps == []
    [gone] = plan({"gone": live("gone", None, max_id=20)}, {"gone": stored("gone", 99, deleted=True)}, None)
    assert gone.steps == [Step("delete")]


def test_a_counter_exhausted_there_and_absent_here_is_created_exhausted():
    [orders] = plan({}, {"orders": stored("orders", 20, max=20)}, None)
    assert orders.steps == [Step("create", start=21, max=21, cache=1), Step("set", next=22)]


def test_counters_no_source_names_are_left_alone():
    plans = plan({"orders": live("orders", 1), "quiet": live("quiet", 1)}, None, {"orders": 5})
    assert [p.name for p in plans] == ["orders"]
    shown = recovery.report(
        plans, dry_run=True, sources={}, here={"orders": live("orders", 1), "quiet": live("quiet", 1)}
    )
    assert (shown["to_change"], shown["unchanged"], shown["not_named"]) == (1, 0, 1)


# -- after a restore, through the admin function ---------------------------------------


def scan(client, table: str) -> list[dict]:
    return sorted(scan_table(client, table), key=lambda item: item["name"]["S"])


def restore(client, items: list[dict]) -> None:
    """The counters table as a restore leaves it: the items it held then, and no other."""
    for item in scan(client, COUNTERS):
        client.delete_item(TableName=COUNTERS, Key={"name": item["name"]})
    for item in items:
        client.put_item(TableName=COUNTERS, Item=item)


def copy_table(client, template, items: list[dict], table: str) -> None:
    client.create_table(**template.create_table_kwargs("CountersTable", table))
    for item in items:
        client.put_item(TableName=table, Item=item)


class Taken:
    """Every ID the API handed out, by counter."""

    def __init__(self, api) -> None:
        self.api = api
        self.highest: dict[str, int] = {}

    def batch(self, name: str, count: int) -> dict:
        reply = self.api.call("batch", name=name, body={"count": count})
        assert reply.status == 200, reply.body
        self.highest[name] = max(self.highest.get(name, 0), reply.body["end"])
        return reply.body

    def next(self, name: str) -> int:
        reply = self.api.call("next-post", name=name)
        assert reply.status == 200, reply.body
        self.highest[name] = max(self.highest.get(name, 0), reply.body["id"])
        return reply.body["id"]


@pytest.fixture
def restored(api, dynamodb, template, logged, tmp_path):
    """A stack whose counters table was put back as it was at a restore point,
    the table as it was just before (OTHER), the records logged since the
    start (a file), and every ID handed out."""
    taken = Taken(api)
    api.call("admin-create", body={"name": "plain"})
    api.call("admin-create", body={"name": "cached", "cache": 4})
    api.call("admin-create", body={"name": "doomed"})
    api.call("admin-create", body={"name": "long-gone"})
    taken.batch("plain", 5)
    taken.batch("doomed", 3)
    taken.batch("long-gone", 2)
    api.call("admin-delete", name="long-gone")
    for _ in range(3):
        taken.next("cached")
    restore_point = scan(dynamodb, COUNTERS)
    # After the restore point: more of each, a counter deleted, one created,
    # one deleted before revived and used
    taken.batch("plain", 10)
    for _ in range(8):
        taken.next("cached")
    taken.batch("doomed", 4)
    api.call("admin-delete", name="doomed")
    api.call("admin-create", body={"name": "fresh", "max": 10_000, "cache": 5})
    taken.batch("fresh", 7)
    api.call("admin-create", body={"name": "long-gone"})
    taken.batch("long-gone", 6)
    copy_table(dynamodb, template, scan(dynamodb, COUNTERS), OTHER)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(line) + "\n" for line in logged()))
    restore(dynamodb, restore_point)
    # A stack is deployed onto a restored table: every function environment,
    # and every block one held in memory, is new.
    reset_core_caches()
    return taken, str(records)


def here_state(api) -> dict[str, dict]:
    page = api.call("admin-list", query={"limit": "1000", "deleted": "true"}).body
    return {counter["name"]: counter for counter in page["counters"]}


def test_from_the_records_every_counter_ends_above_every_id_handed_out(api, dynamodb, restored):
    taken, records = restored
    backend = LocalBackend(api)
    before = scan(dynamodb, COUNTERS)
    # When a dry run plans from the records, Then nothing changes
    planned = recovery.recover(backend, table=None, record_files=[records], region=None, dry_run=True)
    assert scan(dynamodb, COUNTERS) == before
    assert planned["to_change"] == 5
    # When it runs
    done = recovery.recover(backend, table=None, record_files=[records], region=None, dry_run=False)
    # Then each counter's next is above every ID handed out, and hands out above it
    assert done["to_change"] == 5
    state = here_state(api)
    highest = dict(taken.highest)
    for name in highest:
        assert state[name]["next"] > highest[name], name
    for name in ("plain", "doomed", "fresh"):
        assert taken.batch(name, 1)["start"] > highest[name], name
    assert taken.next("cached") > highest["cached"]
    # The records do not say a counter was deleted: long-gone stays deleted
    # here (as at the restore point), with its mark raised
    assert state["long-gone"]["deleted"] is True
    # When it runs again, Then nothing changes
    after = scan(dynamodb, COUNTERS)
    again = recovery.recover(backend, table=None, record_files=[records], region=None, dry_run=False)
    assert again["to_change"] == 0
    assert scan(dynamodb, COUNTERS) == after


def test_from_the_other_table_every_counter_ends_above_its_mark_and_deleted_there_stays_deleted(
    api, dynamodb, restored
):
    taken, _ = restored
    backend = LocalBackend(api)
    marks = {counter.name: counter for counter in read_counters(OTHER).values()}
    before = scan(dynamodb, COUNTERS)
    assert (
        recovery.recover(backend, table=OTHER, record_files=[], region=None, dry_run=True)["to_change"] == 5
    )
    assert scan(dynamodb, COUNTERS) == before
    recovery.recover(backend, table=OTHER, record_files=[], region=None, dry_run=False)
    state = here_state(api)
    for name, counter in marks.items():
        # Above the table's mark, which covers the cached blocks taken and not all served
        assert state[name]["next"] > counter.hwm >= taken.highest[name], name
    # Deleted in either table, deleted here: doomed there, long-gone here
    assert {name for name, counter in state.items() if counter.get("deleted")} == {"doomed", "long-gone"}
    assert (state["fresh"]["max"], state["fresh"]["cache"]) == (10_000, 5)
    assert api.call("batch", name="doomed", body={"count": 1}).status == 404
    assert taken.batch("plain", 1)["start"] > marks["plain"].hwm
    after = scan(dynamodb, COUNTERS)
    assert (
        recovery.recover(backend, table=OTHER, record_files=[], region=None, dry_run=False)["to_change"] == 0
    )
    assert scan(dynamodb, COUNTERS) == after


def test_stepped_counters_end_in_their_residue_above_every_id(
    api, dynamodb, template, lambda_env, logged, tmp_path
):
    """Regions: the stack hands out residue 1 of 3; recovery moves each
    counter to the first ID of that residue above the highest handed out."""
    lambda_env(REGION_COUNT="3", REGION_INDEX="1")
    api.call("admin-create", body={"name": "orders"})
    taken = Taken(api)
    taken.batch("orders", 4)  # 1, 4, 7, 10
    restore_point = scan(dynamodb, COUNTERS)
    taken.batch("orders", 5)  # 13 .. 25
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(line) + "\n" for line in logged()))
    restore(dynamodb, restore_point)
    reset_core_caches()
    recovery.recover(LocalBackend(api), table=None, record_files=[str(records)], region=None, dry_run=False)
    block = taken.batch("orders", 3)
    assert (block["start"], block["step"]) == (28, 3)


def records_file(tmp_path, highest: dict[str, int]) -> str:
    """Records, one a counter, as the functions log them."""
    path = tmp_path / "records.jsonl"
    lines = [
        {"message": "allocation", "counter": name, "first_id": 1, "last_id": last, "step": 1}
        for name, last in highest.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_a_failed_step_stops_the_run_and_a_second_run_finishes(api, tmp_path):
    # Given three counters the records show went further than the stack knows
    for name in ("a", "b", "c"):
        api.call("admin-create", body={"name": name})
    records = records_file(tmp_path, {"a": 10, "b": 20, "c": 30})

    class FailsOnce(LocalBackend):
        """Its first PUT to b meets throttling past every retry."""

        failed = False

        def set_next(self, name, next_id, **options):
            if name == "b" and not self.failed:
                self.failed = True
                raise ServiceUnavailable("PUT /admin/counters/b failed after 8 attempt(s): throttled")
            return super().set_next(name, next_id, **options)

    backend = FailsOnce(api)
    # When the step of b fails
    with pytest.raises(recovery.Stopped) as stopped:
        recovery.recover(backend, table=None, record_files=[records], region=None, dry_run=False)
    # Then the run stops there, saying so, and what came before it is done
    report = stopped.value.report
    assert report["failed"] == {
        "counter": "b",
        "step": "set",
        "next": 21,
        "error": "PUT /admin/counters/b failed after 8 attempt(s): throttled",
    }
    assert [c["counter"] for c in report["counters"] if c.get("done")] == ["a"]
    assert [here_state(api)[name]["next"] for name in ("a", "b", "c")] == [11, 1, 1]
    # When it runs again, Then it finishes
    finished = recovery.recover(backend, table=None, record_files=[records], region=None, dry_run=False)
    assert [c["counter"] for c in finished["counters"] if c.get("done")] == ["b", "c"]
    assert [here_state(api)[name]["next"] for name in ("a", "b", "c")] == [11, 21, 31]


def test_a_stack_that_lists_no_deleted_counters_is_refused_and_nothing_changes(api, dynamodb, tmp_path):
    """An older stack ignores deleted=true: its deleted counters would look
    absent, and a create would bring them back."""
    api.call("admin-create", body={"name": "gone"})
    api.call("admin-delete", name="gone")
    records = records_file(tmp_path, {"gone": 50})

    class Older(LocalBackend):
        def list(self, **query):
            page = super().list(**query)
            page.pop("deleted")
            return page

    before = scan(dynamodb, COUNTERS)
    with pytest.raises(recovery.OlderStack, match="older than this client"):
        recovery.recover(Older(api), table=None, record_files=[records], region=None, dry_run=False)
    assert scan(dynamodb, COUNTERS) == before


def test_a_counter_moved_or_deleted_meanwhile_is_no_failure(api):
    """Between the plan and its step, an allocation moved the counter past
    the step's next, or someone deleted it: what the step was for holds."""
    api.call("admin-create", body={"name": "busy"})
    api.call("admin-create", body={"name": "gone"})
    plans = plan(
        {"busy": live("busy", 1), "gone": live("gone", 1)},
        {"busy": stored("busy", 10), "gone": stored("gone", 0, deleted=True)},
        None,
    )
    api.call("admin-set", name="busy", body={"next": 500})
    api.call("admin-delete", name="gone")
    recovery.apply(LocalBackend(api), plans)
    assert [step["result"] for p in plans for step in p.done] == ["already above", "already deleted"]


# -- the other table ----------------------------------------------------------------


def test_the_other_table_is_read_whole_a_page_at_a_time(api, dynamodb, template):
    api.call("admin-create", body={"name": "a", "start": 10, "max": 500, "cache": 7})
    for name in ("b", "c", "d"):
        api.call("admin-create", body={"name": name})
    api.call("admin-delete", name="d")
    # An item as a stack before regions and cached next wrote it
    dynamodb.put_item(
        TableName=COUNTERS,
        Item={
            "name": {"S": "old"},
            "hwm": {"N": "41"},
            "room": {"N": "59"},
            "max_id": {"N": "100"},
            "created_at": {"S": "2026-01-01T00:00:00.000Z"},
            "updated_at": {"S": "2026-01-01T00:00:00.000Z"},
        },
    )
    copy_table(dynamodb, template, scan(dynamodb, COUNTERS), OTHER)
    found = read_counters(OTHER, page_size=2)
    assert found == {
        "a": StoredCounter("a", 9, 500, 1, 0, 7, False),
        "b": StoredCounter("b", 0, BIG),
        "c": StoredCounter("c", 0, BIG),
        "d": StoredCounter("d", 0, BIG, deleted=True),
        "old": StoredCounter("old", 41, 100),
    }


def test_a_table_that_holds_no_counters_is_refused(api, dynamodb):
    api.call("batch", name="orders", body={"count": 1}, headers={"Idempotency-Key": "k1"})
    with pytest.raises(TableError, match="not the idempotency table"):
        read_counters(TABLE_NAMES["IdempotencyTable"])


def test_a_table_that_is_not_there_is_refused_naming_it(dynamodb):
    with pytest.raises(TableError, match="no table nowhere in us-east-1"):
        read_counters("nowhere")
