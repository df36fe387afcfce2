"""An upgrade keeps the counters a running stack holds: items written by
each released version (tests/fixtures/stored-items/<version>.json, captured
by tests/support/capture_items.py from that version's code and never edited) are
read by the code as it is now. Each counter reads back as it was, a keyed
retry sent before the upgrade is answered from its record, and no counter
hands out an ID it handed out before (docs/compatibility.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from localrun.template import ROOT
from tests.conftest import TABLE_NAMES

FIXTURES = ROOT / "tests" / "fixtures" / "stored-items"
CAPTURED = sorted(FIXTURES.glob("*.json"))


def load(path: Path, client: Any) -> dict[str, Any]:
    """The file's items, put into the empty tables as they were stored."""
    captured = json.loads(path.read_text())
    for logical_id, items in captured["items"].items():
        for item in items:
            if "expiration" in item:
                # A record's expiry is a time, not part of its format: one
                # captured on release day has expired by the time this runs.
                item = {**item, "expiration": {"N": str(int(time.time()) + 3600)}}
            client.put_item(TableName=TABLE_NAMES[logical_id], Item=item)
    return captured


def test_every_release_left_its_items():
    """The file of the current version is there; a release that changed
    nothing in the format still captures its own."""
    version = json.loads((ROOT / "client-node" / "package.json").read_text())["version"]
    assert (FIXTURES / f"{version}.json").exists(), "python -m tests.support.capture_items for this version"
    for path in CAPTURED:
        assert json.loads(path.read_text())["written_by"] == path.stem


@pytest.mark.parametrize("path", CAPTURED, ids=[path.stem for path in CAPTURED])
def test_counters_written_by_an_earlier_version_read_back_as_they_were(api, dynamodb, path):
    captured = load(path, dynamodb)
    listed = api.call("admin-list", query={"limit": "100"}).body["counters"]
    assert {counter["name"]: counter for counter in listed} == captured["counters"]
    for name, state in captured["counters"].items():
        assert api.call("admin-get", name=name).body == state


@pytest.mark.parametrize("path", CAPTURED, ids=[path.stem for path in CAPTURED])
def test_a_keyed_retry_sent_before_the_upgrade_gets_its_first_answer(api, dynamodb, path):
    captured = load(path, dynamodb)
    keyed = captured["keyed_request"]
    retry = api.call(
        "batch", name=keyed["name"], body={"count": keyed["count"]}, headers={"Idempotency-Key": keyed["key"]}
    )
    assert (retry.status, retry.body) == (200, keyed["reply"])
    assert api.call("admin-get", name=keyed["name"]).body == captured["counters"][keyed["name"]]


@pytest.mark.parametrize("path", CAPTURED, ids=[path.stem for path in CAPTURED])
def test_each_counter_goes_on_above_every_id_it_handed_out(api, dynamodb, path):
    captured = load(path, dynamodb)
    for name, state in captured["counters"].items():
        taken = api.call("next-post", name=name)
        assert (taken.status, taken.body) == (200, {"counter": name, "id": state["next"]}), name
    for name, last_id in captured["deleted"].items():
        assert api.call("admin-get", name=name).status == 404
        # Only an admin brings a deleted counter back (docs/security.md).
        assert api.call("batch", name=name, body={"count": 1}).status == 404
        assert api.call("admin-create", body={"name": name}).status == 201
        revived = api.call("batch", name=name, body={"count": 1})
        assert revived.status == 200
        assert revived.body["start"] > last_id, name
