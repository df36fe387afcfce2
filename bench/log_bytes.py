"""What bench/cost.py runs in a fresh interpreter: the functions' real
handlers, in this process, on moto's in-process DynamoDB with the template's
tables and environment, for each kind of request the cost model prices. It
prints, as JSON on its last line, the bytes and the lines each kind writes to the function's
log (the Logger's lines and the metrics' EMF lines, as CloudWatch Logs
ingests them), averaged over a few requests, and the bytes of its allocation records.

    python -m bench.log_bytes

A process of its own because Powertools reads its environment at import.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any

REQUESTS_PER_KIND = 20

# The function each event file goes to (template.yaml's Api events).
FUNCTION_OF = {"next-post": "NextFunction", "batch": "BatchFunction", "admin-create": "AdminFunction"}

# kind -> (event file, counter, body, with an Idempotency-Key)
KINDS: dict[str, tuple[str, str, dict[str, Any] | None, bool]] = {
    "next": ("next-post", "orders", None, False),
    "next_keyed": ("next-post", "orders", None, True),
    "next_from_cache": ("next-post", "members", None, False),
    "next_from_cache_keyed": ("next-post", "members", None, True),
    "batch": ("batch", "orders", {"count": 100_000}, False),
    "batch_keyed": ("batch", "orders", {"count": 100_000}, True),
}


def measure() -> dict[str, float]:
    from localrun.environment import FAKE_AWS
    from localrun.tables import TABLE_NAMES, create_tables
    from localrun.template import default_template

    template = default_template()
    os.environ.update(template.environment("NextFunction", TABLE_NAMES) | FAKE_AWS)
    for variable in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        os.environ.pop(variable, None)

    import boto3
    from moto import mock_aws

    from localrun.invoke import LocalContext, load_handler
    from localrun.template import ROOT

    def load_event(name: str) -> dict[str, Any]:
        """events/<name>.json, the events `sam local invoke -e` takes."""
        return json.loads((ROOT / "events" / f"{name}.json").read_text())

    with mock_aws():
        create_tables(boto3.client("dynamodb"), template, TABLE_NAMES)
        functions = template.functions

        def send(event_name: str, name: str, body: dict[str, Any] | None, key: str | None) -> None:
            event = load_event(event_name)
            event["pathParameters"] = {"name": name}
            event["path"] = event["resource"].replace("{name}", name)
            if body is not None:
                event["body"] = json.dumps(body)
            if key is not None:
                event["headers"]["Idempotency-Key"] = key
                event["multiValueHeaders"]["Idempotency-Key"] = [key]
            logical_id = FUNCTION_OF[event_name]
            spec = functions[logical_id]
            reply = load_handler(spec)(event, LocalContext(logical_id, spec.timeout_seconds))
            assert reply["statusCode"] in (200, 201), reply

        admin = load_event("admin-create")
        admin["body"] = json.dumps({"name": "members", "cache": 1_000_000})
        admin_spec = functions[FUNCTION_OF["admin-create"]]
        load_handler(admin_spec)(admin, LocalContext("AdminFunction", admin_spec.timeout_seconds))
        send("next-post", "members", None, None)  # the cache's block is taken: what follows is from memory
        send("next-post", "orders", None, None)  # cold starts out of the way

        from idblocks_core.logic.allocation import ALLOCATION_RECORD
        from idblocks_core.observability import logger

        results: dict[str, float] = {}
        for kind, (event_name, name, body, keyed) in KINDS.items():
            buffer = io.StringIO()
            previous = logger.registered_handler.setStream(buffer)
            try:
                with contextlib.redirect_stdout(buffer):
                    for i in range(REQUESTS_PER_KIND):
                        # Keys as the client makes them: a UUID's 36 characters.
                        key = f"{kind[:8]:>8}-0000-4000-8000-{i:012d}" if keyed else None
                        send(event_name, name, body, key)
            finally:
                logger.registered_handler.setStream(previous)
            lines = buffer.getvalue().splitlines()
            results[f"{kind}.bytes"] = round(sum(len(line.encode()) for line in lines) / REQUESTS_PER_KIND, 1)
            results[f"{kind}.lines"] = round(len(lines) / REQUESTS_PER_KIND, 2)
            records = [line for line in lines if json.loads(line).get("message") == ALLOCATION_RECORD]
            record_bytes = sum(len(record.encode()) for record in records)
            results[f"{kind}.record_bytes"] = round(record_bytes / REQUESTS_PER_KIND, 1)
        return results


def main() -> None:
    results = measure()
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
