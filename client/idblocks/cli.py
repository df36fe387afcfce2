"""idblocks: the API from the command line. Prints the service's JSON.

    idblocks [--endpoint URL] [--auth iam|api-key|none] COMMAND ...

    next NAME                 one ID
    batch NAME COUNT          a block of COUNT IDs
    create NAME [--start N] [--max N]
    get NAME
    list [--limit N] [--cursor C] [--all]
    set NAME NEXT             move a counter forward
    delete NAME

The endpoint comes from --endpoint or IDBLOCKS_URL (e.g. http://127.0.0.1:3000
for `make dev`). Exit status: 0 ok, 1 service error, 2 bad usage,
3 not found, 4 conflict (exists, exhausted, would move back), 5 unavailable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from idblocks.backend import ApiKeyAuth, Auth, HttpBackend, IamAuth, NoAuth
from idblocks.errors import (
    Conflict,
    CounterNotFound,
    IdBlocksError,
    ServiceUnavailable,
)

# Exit status by error class; any other error exits 1.
EXIT = {CounterNotFound: 3, Conflict: 4, ServiceUnavailable: 5}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="idblocks", description="Hand out and manage idblocks IDs.")
    p.add_argument(
        "--endpoint", default=os.environ.get("IDBLOCKS_URL"), help="API base URL (or IDBLOCKS_URL)"
    )
    p.add_argument(
        "--auth",
        choices=["iam", "api-key", "none"],
        default=os.environ.get("IDBLOCKS_AUTH", "none"),
        help="how to authenticate (or IDBLOCKS_AUTH; default none)",
    )
    p.add_argument("--api-key", default=os.environ.get("IDBLOCKS_API_KEY"), help="with --auth api-key")
    p.add_argument("--region", help="for --auth iam when the endpoint does not name one")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per attempt")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = commands.add_parser("next", help="hand out one ID")
    c.add_argument("name")
    c.add_argument("--idempotency-key", help="repeat a request safely (default: a new key)")
    c = commands.add_parser("batch", help="hand out a block of IDs")
    c.add_argument("name")
    c.add_argument("count", type=_positive)
    c.add_argument("--idempotency-key", help="repeat a request safely (default: a new key)")
    c = commands.add_parser("create", help="create a counter")
    c.add_argument("name")
    c.add_argument("--start", type=_positive)
    c.add_argument("--max", type=_positive)
    c = commands.add_parser("get", help="read a counter")
    c.add_argument("name")
    c = commands.add_parser("list", help="list counters")
    c.add_argument("--limit", type=_positive)
    c.add_argument("--cursor")
    c.add_argument("--all", action="store_true", help="follow cursors to the end")
    c = commands.add_parser("set", help="move a counter forward")
    c.add_argument("name")
    c.add_argument("next", type=_positive)
    c = commands.add_parser("delete", help="delete a counter (its high-water mark is kept)")
    c.add_argument("name")
    return p


def _auth(args: argparse.Namespace) -> Auth:
    if args.auth == "iam":
        return IamAuth(region=args.region)
    if args.auth == "api-key":
        if not args.api_key:
            _fail(2, "--auth api-key needs --api-key or IDBLOCKS_API_KEY")
        return ApiKeyAuth(args.api_key)
    return NoAuth()


def _fail(status: int, message: str) -> NoReturn:
    print(f"idblocks: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def run(args: argparse.Namespace) -> Any:
    if not args.endpoint:
        _fail(2, "no endpoint: pass --endpoint or set IDBLOCKS_URL")
    try:
        backend = HttpBackend(args.endpoint, auth=_auth(args), timeout=args.timeout)
    except ValueError as exc:
        _fail(2, str(exc))
    if args.command == "next":
        return {"counter": args.name, "id": backend.next(args.name, idempotency_key=args.idempotency_key)}
    if args.command == "batch":
        block = backend.allocate(args.name, args.count, idempotency_key=args.idempotency_key)
        return {"counter": args.name, "start": block.start, "end": block.end, "count": len(block)}
    if args.command == "create":
        return backend.create(args.name, start=args.start, max_id=args.max)
    if args.command == "get":
        return backend.get(args.name)
    if args.command == "list":
        page = backend.list(limit=args.limit, cursor=args.cursor)
        if not args.all:
            return page
        counters = list(page["counters"])
        while page["cursor"]:
            page = backend.list(limit=args.limit, cursor=page["cursor"])
            counters += page["counters"]
        return {"counters": counters, "cursor": None}
    if args.command == "set":
        return backend.set_next(args.name, args.next)
    backend.delete(args.name)
    return {"deleted": args.name}


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        result = run(args)
    except IdBlocksError as exc:
        status = next((code for cls, code in EXIT.items() if isinstance(exc, cls)), 1)
        _fail(status, str(exc))
    except ValueError as exc:  # e.g. no AWS credentials for --auth iam
        _fail(2, str(exc))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
