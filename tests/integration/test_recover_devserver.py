"""`idblocks recover` against dev servers, on a DynamoDB of their own
(moto in server mode, as DynamoDB Local would be): IDs are taken, the
counters table is copied (a restore point), more are taken (a counter
deleted, one created), the table as it then stands is kept (the table the
stack ran on), and the copy is put back as the live table, as a restore
and a deploy onto it leave it. The first dev server, with --records, stands
for the stack before the restore, and its console is the records file; the
second, started on the restored table, for the stack after it (new function
environments, no block held from before). Every counter hands out odd IDs
(RegionCount 2, RegionIndex 1). Recovery from the records, and then, with
the copy put back again, from the other table, leaves every counter above
every ID handed out; a dry run and a second run change nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devserver.process import DevServer
from idblocks import cli
from localrun.dynamodb import LOCAL_CREDENTIALS, EmbeddedDynamoDB, client
from localrun.tables import TABLE_NAMES
from localrun.template import default_template
from tests.conftest import scan_table

LIVE = TABLE_NAMES["CountersTable"]
RESTORED = "counters-at-the-restore-point"
OLD = "counters-before-the-restore"
REGION = ("--parameter", "RegionCount=2", "--parameter", "RegionIndex=1")


def scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    return sorted(scan_table(dynamodb, table), key=lambda item: item["name"]["S"])


def copy_of_live(dynamodb: Any, table: str) -> None:
    dynamodb.create_table(**default_template().create_table_kwargs("CountersTable", table))
    for item in scan(dynamodb, LIVE):
        dynamodb.put_item(TableName=table, Item=item)


def put_back(dynamodb: Any, table: str) -> None:
    """The live table as a restore of ``table`` leaves it: its items, and no other."""
    for item in scan(dynamodb, LIVE):
        dynamodb.delete_item(TableName=LIVE, Key={"name": item["name"]})
    for item in scan(dynamodb, table):
        dynamodb.put_item(TableName=LIVE, Item=item)


@dataclass
class Restored:
    dynamodb: Any
    endpoint: str
    after: DevServer
    records: str
    highest: dict[str, int]  # every ID handed out, by counter


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restored]:
    embedded = EmbeddedDynamoDB().start()
    try:
        dynamodb = client(embedded.endpoint, credentials=LOCAL_CREDENTIALS)
        # moto in server mode keeps its tables for the whole process, shared
        # with every test file a worker ran before: begin, as a first deploy
        # does, with none of these tables
        for table in (LIVE, RESTORED, OLD):
            with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                dynamodb.delete_table(TableName=table)
        highest: dict[str, int] = {}

        def took(reply: Any) -> None:
            assert reply.status_code == 200, reply.text
            body = reply.json()
            highest[body["counter"]] = max(
                highest.get(body["counter"], 0), body.get("end", body.get("id", 0))
            )

        with DevServer("--dynamodb-endpoint", embedded.endpoint, "--records", *REGION) as before:
            before.post("/admin/counters", {"name": "plain"})
            before.post("/admin/counters", {"name": "doomed"})
            before.post("/admin/counters", {"name": "cached", "cache": 4})
            took(before.post("/counters/plain/batch", {"count": 5}))
            took(before.post("/counters/doomed/batch", {"count": 3}))
            for _ in range(3):
                took(before.post("/counters/cached/next"))
            copy_of_live(dynamodb, RESTORED)
            took(before.post("/counters/plain/batch", {"count": 4}))
            took(before.post("/counters/doomed/batch", {"count": 2}))
            assert before.delete("/admin/counters/doomed").status_code == 204
            for _ in range(6):
                took(before.post("/counters/cached/next"))
            before.post("/admin/counters", {"name": "fresh", "max": 10_000, "cache": 3})
            took(before.post("/counters/fresh/batch", {"count": 3}))
            before.stop()
        copy_of_live(dynamodb, OLD)
        records = tmp_path_factory.mktemp("records") / "devserver-records.txt"
        records.write_text("".join(before.output))
        put_back(dynamodb, RESTORED)
        with DevServer("--dynamodb-endpoint", embedded.endpoint, *REGION) as after:
            yield Restored(dynamodb, embedded.endpoint, after, str(records), highest)
    finally:
        embedded.stop()


@pytest.fixture
def aws_for_the_table(monkeypatch: pytest.MonkeyPatch, restored: Restored) -> None:
    """The caller's own AWS settings, pointing at the local DynamoDB."""
    for key, value in LOCAL_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", restored.endpoint)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def recover(capsys: pytest.CaptureFixture[str], restored: Restored, *args: str) -> dict[str, Any]:
    """`idblocks recover ...` against the dev server on the restored table."""
    try:
        cli.main(["--endpoint", restored.after.url, "recover", *args])
    except SystemExit as exit:
        pytest.fail(f"recover exited {exit.code}: {capsys.readouterr()}")
    out, err = capsys.readouterr()
    assert err == ""
    report: dict[str, Any] = json.loads(out)
    return report


def first_free(restored: Restored, name: str) -> int:
    """The next ID the counter hands out, taken."""
    reply = restored.after.post(f"/counters/{name}/batch", {"count": 1})
    assert reply.status_code == 200, reply.text
    start: int = reply.json()["start"]
    return start


def test_recovery_from_the_records_puts_every_counter_above_every_id_handed_out(capsys, restored):
    # Given the restored table, and the records the stack logged before it
    live = scan(restored.dynamodb, LIVE)
    assert set(restored.highest) == {"plain", "doomed", "cached", "fresh"}
    # When a dry run plans from them, Then it changes nothing
    planned = recover(capsys, restored, "--from-records", restored.records, "--dry-run")
    assert planned["sources"]["records"]["records"] == 14
    assert planned["to_change"] == 4
    assert scan(restored.dynamodb, LIVE) == live
    # When it runs, Then every counter hands out, in its residue, only IDs
    # above every ID the records name
    recover(capsys, restored, "--from-records", restored.records)
    for name, highest in restored.highest.items():
        taken = first_free(restored, name)
        assert taken > highest, name
        assert taken % 2 == 1, name
    # When it runs again, Then nothing changes
    settled = scan(restored.dynamodb, LIVE)
    assert recover(capsys, restored, "--from-records", restored.records)["to_change"] == 0
    assert scan(restored.dynamodb, LIVE) == settled


def test_recovery_from_the_other_table_puts_every_counter_above_its_mark(capsys, restored, aws_for_the_table):
    # Given the restored table put back again, and the table the stack ran on,
    # served by new function environments: the first test's dev server took
    # IDs from the table this put back moves behind, and refuses it
    # (counter_moved_back), as a deployed function environment would
    put_back(restored.dynamodb, RESTORED)
    with DevServer("--dynamodb-endpoint", restored.endpoint, *REGION) as after:
        restored = dataclasses.replace(restored, after=after)
        live = scan(restored.dynamodb, LIVE)
        marks = {item["name"]["S"]: int(item["hwm"]["N"]) for item in scan(restored.dynamodb, OLD)}
        # When a dry run plans from it, Then it changes nothing
        planned = recover(capsys, restored, "--from-table", OLD, "--dry-run")
        assert (planned["sources"]["table"], planned["to_change"]) == ({"name": OLD, "counters": 4}, 4)
        assert scan(restored.dynamodb, LIVE) == live
        # When it runs
        recover(capsys, restored, "--from-table", OLD)
        # Then the counter deleted there is deleted here, with its mark above its IDs
        assert restored.after.post("/counters/doomed/batch", {"count": 1}).status_code == 404
        listed = restored.after.get("/admin/counters?deleted=true").json()["counters"]
        state = {counter["name"]: counter for counter in listed}
        assert state["doomed"]["deleted"] is True
        assert state["doomed"]["next"] > marks["doomed"] >= restored.highest["doomed"]
        # and every other counter hands out only IDs above the table's mark, which
        # covers every ID handed out, and the blocks held for cached next
        assert (state["fresh"]["max"], state["fresh"]["cache"]) == (10_000, 3)
        for name in ("plain", "cached", "fresh"):
            taken = first_free(restored, name)
            assert taken > marks[name] >= restored.highest[name], name
            assert taken % 2 == 1, name
        # When it runs again, Then nothing changes
        settled = scan(restored.dynamodb, LIVE)
        assert recover(capsys, restored, "--from-table", OLD)["to_change"] == 0
        assert scan(restored.dynamodb, LIVE) == settled
