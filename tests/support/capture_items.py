"""Capture the DynamoDB items this version writes, for the upgrade test.

    python -m tests.support.capture_items tests/fixtures/stored-items/<version>.json

Runs a fixed scenario through the functions (in-process, moto's DynamoDB):
counters created by next and batch and by the admin API, a cached counter,
one moved forward, one bounded by max, one deleted, and one keyed request
whose idempotency record is kept. It writes every item of both tables as
DynamoDB stored it, with what the API answered for each counter afterwards
and the keyed request's reply. tests/unit/test_stored_items.py loads each
captured file into empty tables and checks that the current code reads them:
the same answers, the keyed retry replayed, and no ID handed out twice.

Run it once per release, for the version that writes a new format; the files
of earlier versions stay as they were written.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from typing import Any

from localrun.environment import FAKE_AWS
from localrun.tables import TABLE_NAMES
from localrun.template import ROOT, default_template

KEYED = {"name": "keyed", "count": 5, "key": "fixture-key-1"}


def scenario(api: Any) -> dict[str, Any]:
    api.call("batch", name="plain", body={"count": 10})
    api.call("next-post", name="plain")
    keyed = api.call(
        "batch", name=KEYED["name"], body={"count": KEYED["count"]}, headers={"Idempotency-Key": KEYED["key"]}
    )
    # A later write: the counter's last-write token no longer names the keyed
    # one, so only its idempotency record can answer the retry.
    api.call("next-post", name=KEYED["name"])
    api.call("admin-create", body={"name": "cached", "start": 100, "cache": 10})
    api.call("next-post", name="cached")
    api.call("admin-create", body={"name": "bounded", "start": 50, "max": 100})
    api.call("batch", name="bounded", body={"count": 20})
    api.call("admin-create", body={"name": "moved"})
    api.call("admin-set", name="moved", body={"next": 1000})
    deleted = api.call("batch", name="deleted", body={"count": 7}).body
    api.call("admin-delete", name="deleted")
    listed = api.call("admin-list", query={"limit": "100"}).body["counters"]
    return {
        "counters": {counter["name"]: counter for counter in listed},
        "keyed_request": {**KEYED, "reply": keyed.body},
        # A deleted counter is listed no more; its item keeps the last ID it handed out.
        "deleted": {deleted["counter"]: deleted["end"]},
    }


def capture() -> dict[str, Any]:
    template = default_template()
    os.environ.update(template.environment("NextFunction", TABLE_NAMES) | FAKE_AWS)
    from tests.support.api import LocalApi
    from tests.support.moto_tables import EmptyTables

    with EmptyTables(template).mocked() as client:
        answers = scenario(LocalApi(template))
        items = {}
        for logical_id, table in TABLE_NAMES.items():
            scanned = client.scan(TableName=table, ConsistentRead=True)
            assert "LastEvaluatedKey" not in scanned
            items[logical_id] = sorted(scanned["Items"], key=lambda item: json.dumps(item, sort_keys=True))
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return {"written_by": version, "items": items, **answers}


if __name__ == "__main__":
    # A file, not stdout: the functions log to stdout.
    captured = capture()
    with open(sys.argv[1], "w") as out:
        json.dump(captured, out, indent=1, sort_keys=True)
        out.write("\n")
