"""make dev: the whole service on http://127.0.0.1:3000, no Docker needed.

python -m devserver [--port 3000] [--host 127.0.0.1] [--fresh]
                    [--dynamodb-endpoint URL] [--state-file PATH]
                    [--parameter Name=Value ...] [--create-tables-only]
                    [--item-write-limit WRITES_PER_SECOND]
                    [--api-key KEY ...] [--region REGION] [--records]
                    [--identity ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY[@ACCOUNT[/ORG]] ...]
                    [--account ACCOUNT] [--organization ORG] [--api-id API_ID]
                    [--source-vpce VPC_ENDPOINT_ID]
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from devserver.gateway import gateway_for, shown_path
from devserver.identities import ACCOUNT, LOCAL_API_ID, ORGANIZATION, VPC_ENDPOINT, IdentitySpec
from localrun.invoke import function_environment
from localrun.tables import TABLE_NAMES
from localrun.template import ROOT, Template

DEFAULT_STATE = ROOT / ".dev-state" / "dynamodb.json"
# Beside the state file: the key pair made for a developer with no credentials.
KEY_FILE = "credentials"


class _Stop(BaseException):
    """A stop asked for before the server was up, raised on the main thread
    between two steps of the start (see _Stopper.check). A BaseException, so
    that no ``except Exception`` on the way out takes it for an error."""


def fail(message: str) -> NoReturn:
    print(f"devserver: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devserver", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1 only)")
    parser.add_argument("--port", type=_port, default=3000, help="port (default 3000; 0 picks a free one)")
    parser.add_argument(
        "--dynamodb-endpoint",
        metavar="URL",
        type=_endpoint,
        help="use this DynamoDB (DynamoDB Local, or AWS) instead of the embedded one",
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        default=DEFAULT_STATE,
        help="where the embedded tables' state is kept (default .dev-state/dynamodb.json); "
        "one dev server per file, so a second server needs its own",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start with empty embedded tables (the state replaced is kept as <state file>.bak-<UTC time>)",
    )
    parser.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_parameter,
        help="a template parameter, e.g. AutoCreateCounters=false (repeatable)",
    )
    parser.add_argument(
        "--metrics", action="store_true", help="print the CloudWatch metrics (EMF lines) each request emits"
    )
    parser.add_argument(
        "--records",
        action="store_true",
        help="print the functions' full log records (the allocation record of each request, JSON); "
        "by default the console has one short line per request, and the functions' warnings and errors",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="with --parameter ClientAuth=API_KEY: a key next and batch take in x-api-key "
        "(repeatable; default: one made at start, and printed)",
    )
    parser.add_argument(
        "--region",
        help="with --parameter ClientAuth=...: the region SigV4 requests must be signed for "
        "(default: AWS_REGION, AWS_DEFAULT_REGION or the profile's, else us-east-1)",
    )
    parser.add_argument(
        "--identity",
        action="append",
        default=[],
        metavar="ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY[@ACCOUNT[/ORG]]",
        type=_identity,
        help="with --parameter ClientAuth=...: requests signed with this key may call only what ROLE's "
        "policy allows (execute-api:Invoke, evaluated as IAM does) and the API's resource policy lets "
        "through, as API Gateway combines them: client (the stack's ClientPolicy, with its "
        "ClientCounters), admin (its AdminPolicy), or the path of an IAM policy document (JSON); "
        "@ACCOUNT: a principal of that account (default: --account), /ORG: of that Organization "
        "(default: --organization); repeatable. The dev server's own credentials may call every route "
        "the resource policy does not refuse",
    )
    parser.add_argument(
        "--account",
        type=_account,
        help="with --parameter ClientAuth=...: the account in the ARNs policies are evaluated on "
        "(default: AWS_ACCOUNT_ID, else 123456789012)",
    )
    parser.add_argument(
        "--organization",
        type=_organization,
        help="with --parameter ClientAuth=...: the AWS Organization (o-...) of the stack's account, and of "
        "identities of other accounts that name none (default: in none)",
    )
    parser.add_argument(
        "--source-vpce",
        type=_vpc_endpoint,
        metavar="VPC_ENDPOINT_ID",
        help="with --parameter EndpointType=PRIVATE: the interface VPC endpoint (vpce-...) every request "
        "comes through, as the API's resource policy sees it (aws:SourceVpce; default: none, which a "
        "private API refuses)",
    )
    parser.add_argument(
        "--api-id",
        type=_api_id,
        help="with --parameter ClientAuth=...: the API id in those ARNs, e.g. your deployed API's, which "
        f"its policies name (default: {LOCAL_API_ID}, SAM CLI's)",
    )
    parser.add_argument(
        "--item-write-limit",
        type=_write_limit,
        metavar="WRITES_PER_SECOND",
        help="let the embedded DynamoDB take at most this many writes/s per item and throttle the rest "
        "as DynamoDB throttles a hot key (about 1000 in AWS; default: no limit)",
    )
    parser.add_argument(
        "--create-tables-only",
        action="store_true",
        help="create the tables at --dynamodb-endpoint and exit (for `sam local start-api`)",
    )
    args = parser.parse_args(argv)
    if (args.api_key or args.region) and "ClientAuth" not in dict(args.parameter):
        parser.error("--api-key and --region apply with --parameter ClientAuth=AWS_IAM, API_KEY or NONE")
    given = (args.identity, args.account, args.api_id, args.organization, args.source_vpce)
    if any(given) and "ClientAuth" not in dict(args.parameter):
        parser.error(
            "--identity, --account, --organization, --api-id and --source-vpce apply with --parameter "
            "ClientAuth=AWS_IAM, API_KEY or NONE (without ClientAuth the dev server checks no signature, "
            "so no policy either)"
        )
    if args.source_vpce and dict(args.parameter).get("EndpointType") != "PRIVATE":
        parser.error(
            "--source-vpce applies to a private API (--parameter EndpointType=PRIVATE): a regional API's "
            "requests come through no VPC endpoint"
        )
    if args.create_tables_only and not args.dynamodb_endpoint:
        parser.error("--create-tables-only needs --dynamodb-endpoint")
    if args.item_write_limit is not None and args.dynamodb_endpoint:
        parser.error("--item-write-limit applies to the embedded DynamoDB, not --dynamodb-endpoint")
    return args


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {port}")
    return port


def _endpoint(text: str) -> str:
    url = urlparse(text)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text.rstrip("/")


def _write_limit(text: str) -> int:
    try:
        limit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of writes/s: {text!r}") from None
    if limit < 1:
        raise argparse.ArgumentTypeError(f"the item write limit must be at least 1, not {limit}")
    return limit


def _identity(text: str) -> IdentitySpec:
    try:
        return IdentitySpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _account(text: str) -> str:
    if not ACCOUNT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"an AWS account is 12 digits, not {text!r}")
    return text


def _organization(text: str) -> str:
    if not ORGANIZATION.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"an AWS Organization's id is o- and 10 to 32 lower-case letters or digits, not {text!r}"
        )
    return text


def _vpc_endpoint(text: str) -> str:
    if not VPC_ENDPOINT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a VPC endpoint's id is vpce- and 8 to 17 hex digits, not {text!r}")
    return text


def _api_id(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9]{1,64}", text):
        raise argparse.ArgumentTypeError(f"an API id is letters and digits (as a123456789), not {text!r}")
    return text


def _parameter(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    stopper = _Stopper()
    # Explicit handlers for both: a shell starts background jobs with SIGINT
    # ignored, and Python then never installs its Ctrl-C handler, so a server
    # started with `make dev &`, nohup or setsid would ignore `kill -INT`.
    signal.signal(signal.SIGINT, stopper.request)
    signal.signal(signal.SIGTERM, stopper.request)
    try:
        _run(args, stopper)
    except _Stop:
        print("idblocks dev server stopped before it was ready", flush=True)


def _run(args: argparse.Namespace, stopper: _Stopper) -> None:
    template = read_template(args)
    gateway = read_gateway(args, template)
    configure_logging()
    stopper.check()
    if args.dynamodb_endpoint:
        tables = external_tables(args.dynamodb_endpoint, template)
        if args.create_tables_only:
            names = ", ".join(TABLE_NAMES.values())
            print(f"tables at {tables.endpoint}: {names} ({len(tables.created)} created)")
            return
        lock = None
    else:
        # Held from before the state is read until the process ends: the
        # kernel releases it however the process dies.
        lock = lock_state(args.state_file)
        stopper.check()
        tables = embedded_tables(args.state_file, args.fresh, template, args.item_write_limit)
    try:
        stopper.check()
        environment = function_environment(template, TABLE_NAMES, tables.endpoint, tables.credentials)
        runner = build_runner(template, environment, tables.save, args.metrics, args.records)
        stopper.check()
        api, server = start_server(args, template, runner, gateway)
        tables.save()  # a fresh start replaces the old state only once the server is up
        url = f"http://{_url_host(args.host)}:{server.server_port}"
        if lock is not None:
            lock.note(pid=os.getpid(), port=server.server_port, url=url)
        banner(url, tables.description, api, gateway)
        serve_until_stopped(server, stopper)
        tables.save()
    finally:
        tables.stop()
    print("idblocks dev server stopped", flush=True)


def read_template(args: argparse.Namespace) -> Template:
    """template.yaml with the parameters given, refused as CloudFormation
    refuses it: a value its parameter does not allow, or values one of its
    rules refuses (with the rule's reason)."""
    if dict(args.parameter).get("ExistingCountersTable"):
        # A deployed stack's table, in AWS: the functions here would name a
        # table the dev server does not have, and fail every request.
        fail(
            "--parameter ExistingCountersTable names a deployed stack's counters table; the dev server "
            f"keeps its counters in its own ({TABLE_NAMES['CountersTable']}, saved in --state-file)"
        )
    try:
        template = Template(parameter_overrides=dict(args.parameter))
    except ValueError as exc:
        fail(str(exc))
    for rule, reason in template.refusals():
        fail(f"template.yaml's rule {rule} refuses these parameters: {reason}")
    return template


def read_gateway(args: argparse.Namespace, template: Template) -> Any:
    """API Gateway's authentication for the ClientAuth given, with the dev
    server's credentials (read before the functions' environment replaces
    this process's own) and the identities' policies."""
    from devserver.policy import PolicyError
    from devserver.state import StateError

    try:
        return gateway_for(
            dict(args.parameter).get("ClientAuth"),
            dict(os.environ),
            args.api_key,
            args.region,
            template=template,
            identities=args.identity,
            account=args.account,
            api_id=args.api_id or LOCAL_API_ID,
            organization=args.organization,
            source_vpce=args.source_vpce,
            key_file=args.state_file.parent / KEY_FILE,
        )
    except (PolicyError, StateError) as exc:
        fail(str(exc))


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stdout
    )
    for noisy in ("werkzeug", "samcli", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def lock_state(state_file: Path) -> Any:
    from devserver.lock import StateInUse, StateLock

    try:
        return StateLock(state_file).acquire()
    except StateInUse as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot lock {state_file}.lock: {exc.strerror or exc}")


@dataclass
class LocalTables:
    """The DynamoDB the functions use: where it is, the credentials it takes,
    and, for the embedded one, the state file its tables are kept in."""

    endpoint: str
    credentials: dict[str, str]
    description: str = ""
    created: list[str] = field(default_factory=list)
    embedded: Any = None
    state: Any = None
    _saving: threading.Lock = field(default_factory=threading.Lock)

    def save(self) -> None:
        # One snapshot-and-save at a time, so an older snapshot never lands
        # after a newer one (the last save on the way out races the last request).
        if self.embedded is not None and self.state is not None:
            with self._saving:
                self.state.save({lid: self.embedded.items(name) for lid, name in TABLE_NAMES.items()})

    def stop(self) -> None:
        if self.embedded is not None:
            limit = self.embedded.write_limit
            if limit is not None:
                # How often the budget bit, for whoever tunes block sizes against it.
                print(f"item writes throttled: {limit.throttled}", flush=True)
            self.embedded.stop()


def external_tables(endpoint: str, template: Template) -> LocalTables:
    """The template's tables at ``endpoint``, created if missing."""
    from localrun.dynamodb import LOCAL_CREDENTIALS
    from localrun.tables import create_tables

    # DynamoDB Local takes any credentials; AWS takes the developer's own.
    defaults = {"AWS_DEFAULT_REGION": "us-east-1"}
    if not urlparse(endpoint).hostname.endswith("amazonaws.com"):
        defaults = LOCAL_CREDENTIALS | defaults
    credentials = {key: value for key, value in defaults.items() if key not in os.environ}
    dynamodb = check_endpoint(endpoint, credentials)
    created = create_tables(dynamodb, template, TABLE_NAMES)
    names = ", ".join(TABLE_NAMES.values())
    return LocalTables(endpoint, credentials, description=f"{endpoint} (tables {names})", created=created)


def check_endpoint(endpoint: str, credentials: Mapping[str, str]) -> Any:
    from localrun.dynamodb import client

    config = Config(connect_timeout=2, read_timeout=5, retries={"total_max_attempts": 1})
    dynamodb = client(endpoint, config, credentials)
    try:
        dynamodb.list_tables(Limit=1)
    except (BotoCoreError, ClientError) as exc:
        fail(f"cannot reach DynamoDB at {endpoint}: {exc}")
    return dynamodb


def embedded_tables(
    state_file: Path, fresh: bool, template: Template, item_write_limit: int | None = None
) -> LocalTables:
    """The embedded DynamoDB, started, with the template's tables holding
    the saved state (none if ``fresh``)."""
    from devserver.state import StateError, StateFile
    from localrun.dynamodb import LOCAL_CREDENTIALS, EmbeddedDynamoDB, client
    from localrun.tables import create_tables, load_items

    state = StateFile(state_file)
    backup = None
    try:
        if fresh:
            backup = state.backup()
        saved = {} if fresh else state.load() or {}
    except StateError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot back up state file {state_file}: {exc.strerror or exc}")
    # The budget is switched on only once the saved items are back in, or
    # restoring a large table would itself be throttled.
    embedded = EmbeddedDynamoDB().start()
    dynamodb = client(embedded.endpoint, credentials=LOCAL_CREDENTIALS)
    create_tables(dynamodb, template, TABLE_NAMES)
    for logical_id, items in saved.items():
        if logical_id in TABLE_NAMES:
            load_items(dynamodb, TABLE_NAMES[logical_id], items)
    if item_write_limit is not None:
        embedded.limit_item_writes(item_write_limit)
    if not fresh:
        how = f"{len(saved.get('CountersTable', []))} counter(s) restored"
    elif backup is not None:
        how = f"fresh; the state it replaces is kept in {shown_path(backup)}"
    else:
        how = "fresh"
    description = f"embedded, kept in {shown_path(state_file)} ({how})"
    if item_write_limit is not None:
        description += f", at most {item_write_limit} writes/s per item"
    return LocalTables(
        embedded.endpoint, dict(LOCAL_CREDENTIALS), description=description, embedded=embedded, state=state
    )


def build_runner(
    template: Template,
    environment: Mapping[str, str],
    after_invoke: Callable[[], None],
    show_metrics: bool,
    show_records: bool = False,
) -> Any:
    """The template's functions, loaded in this process with ``environment``."""
    from devserver.server import InProcessRunner, quiet_function_logs
    from localrun.invoke import install_environment

    install_environment(environment)
    runner = InProcessRunner(template.functions, after_invoke=after_invoke, show_metrics=show_metrics)
    runner.preload()
    if not show_records:
        quiet_function_logs(environment["POWERTOOLS_SERVICE_NAME"])
    return runner


def start_server(args: argparse.Namespace, template: Template, runner: Any, gateway: Any) -> tuple[Any, Any]:
    """The API as SAM CLI reads it from the template, listening; returns it and the server."""
    from devserver.server import create_app, load_api, serve
    from localrun.openapi import document

    api = load_api(template.path, template.parameters)
    app = create_app(api, runner, document(), gateway)  # for the environment build_runner installed
    try:
        return api, serve(app, args.host, args.port)
    except OSError as exc:
        advice = ""
        if exc.errno == errno.EADDRINUSE:
            other = args.port + 1 if args.port else 3001
            advice = (
                " (another server has it, a second `make dev`?): give this one another port, "
                f'make dev DEV_ARGS="--port {other}" (--port 0 takes any free one)'
            )
        fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}{advice}")


def serve_until_stopped(server: Any, stopper: _Stopper) -> None:
    try:
        stopper.serving(server)
        server.serve_forever()
    finally:
        server.server_close()


class _Stopper:
    """SIGINT/SIGTERM: before the server is up, abandon the start at the next
    step (nothing is saved yet beyond what a crash would leave); once it
    serves, ask serve_forever to return after the request in hand, so the
    last response is saved before the process goes.

    The handler itself only records the request. Raising from it would throw
    into whatever the main thread was running, a finalizer included, where
    Python can only print the exception and carry on starting."""

    def __init__(self) -> None:
        self._server: Any = None
        self._stopping = False

    def serving(self, server: Any) -> None:
        self._server = server
        if self._stopping:
            self._shut_down()

    def request(self, *_: object) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self._server is not None:
            self._shut_down()

    def check(self) -> None:
        """Between two steps of the start: abandon it if a stop was asked for."""
        if self._stopping:
            raise _Stop

    def _shut_down(self) -> None:
        # shutdown() waits for serve_forever, which runs on this (the main)
        # thread under the signal handler: it must be called from another.
        threading.Thread(target=self._server.shutdown, name="stop", daemon=True).start()


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - only naming the wildcard, to print a usable URL
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


# The banner's curl examples: (method, route, what follows curl, the body).
TRIES = (
    ("POST", "/counters/{name}/next", "-X POST {url}/counters/orders/next", ""),
    ("POST", "/counters/{name}/batch", "-X POST {url}/counters/orders/batch", '{"count": 100}'),
    ("POST", "/admin/counters", "-X POST {url}/admin/counters", '{"name": "invoices", "start": 1000}'),
    ("GET", "/admin/counters/{name}", "{url}/admin/counters/invoices", ""),
)


def banner(url: str, dynamodb: str, api: Any, gateway: Any) -> None:
    routes = sorted((route.path, ",".join(route.methods), route.function_name) for route in api.routes)
    tries = []
    for method, resource, target, body in TRIES:
        sent = f" -H 'Content-Type: application/json' -d '{body}'" if body else ""
        tries.append(f"  curl {target.format(url=url)}{sent}{gateway.curl_auth(method, resource)}")
    lines = [
        "idblocks dev server",
        f"  API       {url}   (routes and events: SAM CLI, from template.yaml)",
        f"  OpenAPI   {url}/openapi.json",
        f"  DynamoDB  {dynamodb}",
        *gateway.describe(),
        "",
        *(f"  {methods:<16} {path:<26} -> {function}" for path, methods, function in routes),
        "",
        "Try:",
        *tries,
        "",
        f"ready: {url}   (Ctrl-C stops)",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
