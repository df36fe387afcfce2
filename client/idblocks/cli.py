"""idblocks: the API from the command line. Prints the service's JSON.

    idblocks [--endpoint URL] [--auth iam|api-key|none] COMMAND ...

    next NAME                 one ID
    batch NAME COUNT          a block of COUNT IDs
    create NAME [--start N] [--max N] [--cache N]
    get NAME
    list [--limit N] [--cursor C] [--all] [--deleted]
    set NAME NEXT             move a counter forward
    update NAME [--next N] [--cache N]
    delete NAME
    recover [--from-table TABLE] [--from-records FILE ...] [--dry-run]

Every failure is one line on stderr, with an exit status of EXIT_STATUSES.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from idblocks import recovery
from idblocks.auth import region_of
from idblocks.backend import ApiKeyAuth, Auth, HttpBackend, IamAuth, NoAuth
from idblocks.counters_table import TableError
from idblocks.errors import (
    AuthError,
    ConfigurationError,
    Conflict,
    CounterMovedBack,
    CounterNotFound,
    IdBlocksError,
    InvalidRequest,
    ServiceUnavailable,
)
from idblocks.records import RECORDS_FILE_LIMIT, RecordsError

AUTH_CHOICES = ("iam", "api-key", "none")

# Exit status by error class, most specific first; any other error exits 1.
# A request the service refuses as wrong (400, 401, 403, 422), or that the
# client refuses before sending, is the caller's to fix, as bad usage is.
EXIT = (
    (CounterNotFound, 3),
    (Conflict, 4),
    (ServiceUnavailable, 5),
    (InvalidRequest, 2),
    (AuthError, 2),
    (ConfigurationError, 2),
    (RecordsError, 2),
    (TableError, 2),
    (recovery.OlderStack, 2),
    (recovery.PlanError, 2),
)

# What each exit status means, for --help and the documentation's table. A
# 409 the client retries (request_in_progress) ends in 5 if it never clears.
EXIT_STATUSES = (
    (0, "done; the result is printed as JSON"),
    (
        1,
        "the service failed (a 500 it was not safe to repeat; counter_moved_back: the counter moved back,"
        " and nothing was handed out), or answered something this client cannot read",
    ),
    (
        2,
        "bad usage; a malformed endpoint or region; a request the service refuses (400, 405, 413, 415, "
        "422) or does not allow (401, 403); no AWS credentials or region for --auth iam; recover: records "
        "or a table it cannot read, or a stack too old to list deleted counters",
    ),
    (3, "no such counter (404)"),
    (
        4,
        "conflict (409): counter_exists, counter_exhausted, below_high_water_mark, "
        "counter_would_move_back, next_beyond_max, region_mismatch",
    ),
    (5, "unavailable: throttled, 5xx or unreachable after every retry"),
)


def _exit_statuses_help() -> str:
    lines = ["exit status:"]
    for status, meaning in EXIT_STATUSES:
        wrapped = textwrap.wrap(meaning, width=74)
        lines.append(f"  {status}  {wrapped[0]}")
        lines += [f"     {line}" for line in wrapped[1:]]
    return "\n".join(lines) + "\n"


DEPLOYED = """\
a deployed stack (ClientAuth AWS_IAM, the default; the admin routes always):
  idblocks --endpoint https://ID.execute-api.REGION.amazonaws.com/v1 --auth iam next orders
  credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY(/AWS_SESSION_TOKEN),
  AWS_PROFILE, or an IAM role; the region from --region, the execute-api host name,
  AWS_REGION or AWS_DEFAULT_REGION. With ClientAuth API_KEY: --auth api-key --api-key KEY.
"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="idblocks",
        description="Hand out and manage idblocks IDs. Prints the service's answer as JSON.",
        epilog=_exit_statuses_help() + "\n" + DEPLOYED,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--endpoint",
        metavar="URL",
        default=_env("IDBLOCKS_URL"),
        help="the API's base URL, with the stage (a deployed stack's ApiUrl, e.g. .../v1), or "
        "http://127.0.0.1:3000 for `make dev`; required one way or the other (default: $IDBLOCKS_URL)",
    )
    p.add_argument(
        "--auth",
        # Checked after parsing, so that IDBLOCKS_AUTH is held to the same choices.
        default=_env("IDBLOCKS_AUTH") or "none",
        metavar="{" + ",".join(AUTH_CHOICES) + "}",
        help="iam: SigV4 (deployed stacks); api-key: x-api-key; none: no authentication "
        "(default: $IDBLOCKS_AUTH, else none)",
    )
    p.add_argument(
        "--api-key",
        metavar="KEY",
        default=_env("IDBLOCKS_API_KEY"),
        help="the key for --auth api-key (default: $IDBLOCKS_API_KEY)",
    )
    p.add_argument(
        "--region",
        help="region to sign for, with --auth iam, and of recover's --from-table (default: the execute-api "
        "URL's, else $AWS_REGION, $AWS_DEFAULT_REGION or the AWS profile's)",
    )
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        default=10.0,
        help="seconds to wait for each answer; throttling, 5xx and network errors are retried with "
        "backoff for up to 30 s (default: 10)",
    )
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    key_help = "send this Idempotency-Key, to repeat an earlier request safely (default: a new random key)"
    c = commands.add_parser("next", help="hand out one ID")
    c.add_argument("name", help="counter name")
    c.add_argument("--idempotency-key", metavar="KEY", help=key_help)
    c = commands.add_parser("batch", help="hand out a block of IDs")
    c.add_argument("name", help="counter name")
    c.add_argument("count", type=_positive, help="how many IDs (at most the service's MaxBatchSize)")
    c.add_argument("--idempotency-key", metavar="KEY", help=key_help)
    c = commands.add_parser("create", help="create a counter")
    c.add_argument("name", help="counter name: 1-128 of A-Z a-z 0-9 _ . -, not . or ..")
    c.add_argument(
        "--start",
        metavar="N",
        type=_positive,
        help="first ID to hand out (default: 1, or above a deleted counter's old IDs)",
    )
    c.add_argument("--max", metavar="N", type=_positive, help="last ID it may hand out (default: 2^53-1)")
    cache_help = (
        "the most IDs each service environment takes at a time for next, 1 to 1,000,000; above 1 next IDs "
        "are unique but not in order across environments, and unused ones are skipped"
    )
    c.add_argument("--cache", metavar="N", type=_positive, help=f"{cache_help} (default: 1)")
    c = commands.add_parser("get", help="read a counter")
    c.add_argument("name", help="counter name")
    c = commands.add_parser("list", help="list counters")
    c.add_argument(
        "--limit", metavar="N", type=_positive, help="counters per page (default: the service's page size)"
    )
    c.add_argument(
        "--cursor",
        metavar="CURSOR",
        help="where to go on, from the previous page's cursor (default: the start)",
    )
    c.add_argument("--all", action="store_true", help="follow cursors to the end (default: one page)")
    c.add_argument(
        "--deleted",
        action="store_true",
        help="deleted counters too, each with the high-water mark it keeps (default: live counters only)",
    )
    c = commands.add_parser("set", help="move a counter forward")
    c.add_argument("name", help="counter name")
    c.add_argument("next", type=_positive, help="the next ID to hand out; never below the current one")
    c.add_argument(
        "--deleted",
        action="store_true",
        help="a deleted counter too: raise the high-water mark it keeps; it stays deleted "
        "(default: a deleted counter is not found)",
    )
    c = commands.add_parser("update", help="move a counter forward and/or change its cache setting")
    c.add_argument("name", help="counter name")
    c.add_argument(
        "--next",
        metavar="N",
        type=_positive,
        help="the next ID to hand out; never below the current one (default: unchanged)",
    )
    c.add_argument("--cache", metavar="N", type=_positive, help=f"{cache_help} (default: unchanged)")
    c = commands.add_parser("delete", help="delete a counter (its high-water mark is kept)")
    c.add_argument("name", help="counter name")
    c = commands.add_parser(
        "recover",
        help="after a restore from a backup: move every counter above every ID handed out (docs/deploy.md)",
        description="After a restore from a backup, move every counter the sources name above every ID "
        "they show was handed out, through the admin API only (raise only: set, create, delete; a counter "
        "deleted in either table stays deleted). Give --from-table, --from-records or both. Prints a JSON "
        "report; a run that stops says where, and running it again finishes. Nothing is changed before "
        "every source was read; a file over its size limit is refused before it is read.",
    )
    c.add_argument(
        "--from-table",
        metavar="TABLE",
        help="another counters table (the one the stack ran on before the restore, or the restored one), "
        "read with your AWS credentials, in --region's region, at AWS_ENDPOINT_URL_DYNAMODB if set "
        "(default: none)",
    )
    c.add_argument(
        "--from-records",
        metavar="FILE",
        action="append",
        default=[],
        help="allocation records: the dev server's --records output, aws logs filter-log-events' JSON or "
        "text, or a Logs Insights export (get-query-results, or the console's CSV or JSON); at most "
        f"{RECORDS_FILE_LIMIT // 2**30} GiB a file, and repeatable (default: none)",
    )
    c.add_argument(
        "--dry-run", action="store_true", help="print the plan and change nothing (default: carry it out)"
    )
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


def _what_to_do(error: IdBlocksError, args: argparse.Namespace) -> str:
    """What the error's own words leave out: what the caller does next."""
    if isinstance(error, CounterMovedBack):
        # Every ID above where it moved back to may have been handed out before.
        name = getattr(args, "name", "NAME")
        return (
            f"; move the counter above every ID it handed out before (idblocks set {name} NEXT, or, after"
            " a restore from a backup, idblocks recover) before taking more from it"
        )
    return ""


def run(args: argparse.Namespace) -> Any:
    if not args.endpoint:
        _fail(2, "no endpoint: pass --endpoint or set IDBLOCKS_URL")
    try:
        backend = HttpBackend(args.endpoint, auth=_auth(args), timeout=args.timeout)
    except ValueError as exc:  # the endpoint is not an http(s) URL
        _fail(2, str(exc))
    if args.command == "next":
        return {"counter": args.name, "id": backend.next(args.name, idempotency_key=args.idempotency_key)}
    if args.command == "batch":
        block = backend.allocate(args.name, args.count, idempotency_key=args.idempotency_key)
        return {
            "counter": args.name,
            "start": block.start,
            "end": block.end,
            "count": len(block),
            "step": block.step,
        }
    if args.command == "create":
        return backend.create(args.name, start=args.start, max_id=args.max, cache=args.cache)
    if args.command == "get":
        return backend.get(args.name)
    if args.command == "list":
        page = backend.list(limit=args.limit, cursor=args.cursor, deleted=args.deleted)
        if not args.all:
            return page
        counters = list(page["counters"])
        while page["cursor"]:
            page = backend.list(limit=args.limit, cursor=page["cursor"], deleted=args.deleted)
            counters += page["counters"]
        return {"counters": counters, "cursor": None} | ({"deleted": True} if page.get("deleted") else {})
    if args.command == "set":
        return backend.set_next(args.name, args.next, deleted=args.deleted)
    if args.command == "update":
        if args.next is None and args.cache is None:
            _fail(2, "update needs --next, --cache or both")
        return backend.update(args.name, next_id=args.next, cache=args.cache)
    if args.command == "recover":
        return _recover(args, backend)
    backend.delete(args.name)
    return {"deleted": args.name}


def _recover(args: argparse.Namespace, backend: HttpBackend) -> Any:
    if args.from_table is None and not args.from_records:
        _fail(2, "recover needs --from-table, --from-records or both")
    try:
        return recovery.recover(
            backend,
            table=args.from_table,
            record_files=args.from_records,
            # The table is the stack's: in the region its execute-api URL names, if no other is given.
            region=args.region or region_of(backend.endpoint),
            dry_run=args.dry_run,
        )
    except recovery.Stopped as stopped:
        print(json.dumps(stopped.report))
        _fail(_status_of(stopped.error), str(stopped))


def _status_of(exc: BaseException) -> int:
    return next((code for cls, code in EXIT if isinstance(exc, cls)), 1)


# The options of idblocks itself, which go before the command.
GLOBAL_OPTIONS = ("--endpoint", "--auth", "--api-key", "--region", "--timeout")


def _options_first(argv: list[str], command: str) -> list[str] | None:
    """``argv`` with idblocks' own options given after ``command`` moved
    before it (with their values); None if there are none."""
    at = argv.index(command)
    moved: list[str] = []
    kept: list[str] = []
    rest = iter(argv[at + 1 :])
    for arg in rest:
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS:
            moved += [arg] if "=" in arg else [arg, next(rest, "")]
        else:
            kept.append(arg)
    return [*argv[:at], *moved, command, *kept] if moved else None


def _unknown_option(p: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """What to say of the first option before the command that idblocks
    does not have (None: there is none). argparse sets such an option aside
    and reads the word after it as the command: `--endpont URL next` was
    "invalid choice: 'URL'", which named neither the option nor the typo."""
    # argparse lists a parser's options nowhere public; _actions it has always had.
    takes_value = {option: action.nargs != 0 for action in p._actions for option in action.option_strings}
    words = iter(argv)
    for word in words:
        if word == "--" or not word.startswith("-"):
            return None  # the command: what follows is the command's
        name = word.split("=", 1)[0]
        # argparse takes an option's unambiguous prefix too (--end for --endpoint).
        matches = [name] if name in takes_value else [o for o in takes_value if o.startswith(name)]
        if not matches:
            close = difflib.get_close_matches(name, list(takes_value), n=1)
            return f"unknown option {name}" + (f": did you mean {close[0]}?" if close else "")
        if len(matches) > 1:
            return None  # ambiguous: argparse says so, naming each
        if "=" not in word and takes_value[matches[0]]:
            next(words, None)  # its value
    return None


def main(argv: Sequence[str] | None = None) -> None:
    p = parser()
    given = list(sys.argv[1:] if argv is None else argv)
    unknown_option = _unknown_option(p, given)
    if unknown_option:
        p.error(unknown_option)
    args, unknown = p.parse_known_args(given)
    if unknown:
        fixed = _options_first(given, args.command)
        hint = f"; idblocks' own options go before the command: idblocks {shlex.join(fixed)}" if fixed else ""
        p.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if args.auth not in AUTH_CHOICES:
        choices = ", ".join(AUTH_CHOICES)
        p.error(f"argument --auth (or IDBLOCKS_AUTH): invalid choice: {args.auth!r} (choose from {choices})")
    try:
        result = run(args)
    except IdBlocksError as exc:
        _fail(_status_of(exc), str(exc) + _what_to_do(exc, args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
