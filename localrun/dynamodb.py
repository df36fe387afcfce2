"""An embedded DynamoDB for local runs: moto in server mode on loopback.

moto's server answers requests on many threads and its DynamoDB model does not
lock, so two writes to one item at the same moment could interleave (the
in-process ``mock_aws`` was seen to lose concurrent updates). Real DynamoDB
applies each item write atomically; here every request is served under one
lock, which gives the same guarantee. It is the reason this module exists
instead of a bare ``ThreadedMotoServer``.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import boto3
from botocore.config import Config
from moto.dynamodb.models import dynamodb_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

# Credentials for the embedded server only; moto accepts any.
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


class _OneAtATime:
    """WSGI middleware: serve one request at a time, body included."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


# The writes one item takes: DynamoDB answers a write beyond one partition's
# per-key ceiling (about 1,000 writes/s) with this error and reason, whatever
# the table's capacity mode; the names are those of the DynamoDB API reference.
_WRITE_ACTIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
THROTTLED_ERROR = "ProvisionedThroughputExceededException"
HOT_KEY_REASON = "TableWriteKeyRangeThroughputExceeded"
_LOCAL_ACCOUNT = "123456789012"  # moto's default account


class ItemWriteLimit:
    """A per-item write budget: at most ``per_second`` writes to one item in
    any one-second window. A conditional write that fails its condition still
    counts, as it consumes write capacity in DynamoDB."""

    def __init__(self, per_second: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_second < 1:
            raise ValueError(f"an item write limit must be at least 1 write/s, not {per_second}")
        self.per_second = per_second
        self._clock = clock
        self._windows: dict[tuple[str, str], tuple[int, int]] = {}
        self._lock = threading.Lock()  # the server answers on many threads
        self.throttled = 0

    def admit(self, table: str, key: Mapping[str, Any]) -> bool:
        """Count one write to ``key`` of ``table``; False if it is over the budget."""
        item = (table, json.dumps(key, sort_keys=True))
        second = int(self._clock())
        with self._lock:
            window, used = self._windows.get(item, (second, 0))
            if window != second:
                window, used = second, 0
            if used >= self.per_second:
                self.throttled += 1
                return False
            self._windows[item] = (window, used + 1)
            return True


def _key_attributes(table_name: str) -> tuple[str, ...]:
    """The key attribute names of a table of the embedded server (empty if none)."""
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            table = backend.tables.get(table_name)
            if table is not None:
                return tuple(name for name in (table.hash_key_attr, table.range_key_attr) if name)
    return ()


def _throttled_response(table: str, start_response: Callable[..., Any]) -> list[bytes]:
    body = {
        "__type": f"com.amazonaws.dynamodb.v20120810#{THROTTLED_ERROR}",
        "message": "The level of configured provisioned throughput for the table was exceeded. "
        "Consider increasing your provisioning level with the UpdateTable API.",
        "ThrottlingReasons": [
            {
                "reason": HOT_KEY_REASON,
                "resource": f"arn:aws:dynamodb:{os.environ.get('AWS_REGION', 'us-east-1')}:"
                f"{_LOCAL_ACCOUNT}:table/{table}",
            }
        ],
    }
    payload = json.dumps(body).encode()
    start_response(
        "400 Bad Request",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(payload)))],
    )
    return [payload]


class _ItemWriteBudget:
    """WSGI middleware: refuse an item write over the item's budget, as
    DynamoDB refuses writes to a hot key, before moto sees it."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.limit: ItemWriteLimit | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        limit = self.limit
        action = environ.get("HTTP_X_AMZ_TARGET", "").rpartition(".")[2]
        if limit is None or action not in _WRITE_ACTIONS:
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(raw)
        try:
            request = json.loads(raw)
            table = request["TableName"]
            key = request["Item"] if action == "PutItem" else request["Key"]
        except (ValueError, KeyError, TypeError):
            return self.app(environ, start_response)  # moto answers a malformed request itself
        if action == "PutItem":
            key = {name: value for name, value in key.items() if name in _key_attributes(table)}
        if not limit.admit(table, key):
            return _throttled_response(table, start_response)
        return self.app(environ, start_response)


# How often the serving thread looks whether stop() was called: stop()
# waits for that look (socketserver's default: every half a second).
SHUTDOWN_POLL_SECONDS = 0.05


class _QuietHandler(MotoRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # the dev server logs API requests, not every DynamoDB call


class EmbeddedDynamoDB:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, item_write_limit: int | None = None) -> None:
        """``item_write_limit``: writes/s one item takes before DynamoDB's
        hot-key throttling answers (None: unlimited, as before)."""
        self._app = _OneAtATime(DomainDispatcherApplication(create_backend_app))
        self._budget = _ItemWriteBudget(self._app)
        if item_write_limit is not None:
            self.limit_item_writes(item_write_limit)
        self._server: BaseWSGIServer = make_server(
            host, port, self._budget, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), name="dynamodb", daemon=True
        )

    def limit_item_writes(self, per_second: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        """From now on, at most ``per_second`` writes/s per item (None: no limit)."""
        self._budget.limit = ItemWriteLimit(per_second, clock) if per_second is not None else None

    @property
    def write_limit(self) -> ItemWriteLimit | None:
        return self._budget.limit

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> EmbeddedDynamoDB:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def items(self, table_name: str) -> list[dict[str, Any]]:
        """Every item of a table, in DynamoDB JSON, read while no request is
        being served, so the snapshot is consistent."""
        with self._app.lock:
            for regions in dynamodb_backends.values():
                for backend in regions.values():
                    table = backend.tables.get(table_name)
                    if table is not None:
                        return [item.to_json()["Attributes"] for item in table.all_items()]
        raise KeyError(f"no table {table_name}")


def client(endpoint: str, config: Config | None = None, credentials: Mapping[str, str] | None = None) -> Any:
    """A DynamoDB client for ``endpoint``. ``credentials`` (AWS_* variables)
    take the place of the environment's where given, so a caller need not
    change os.environ to reach a local DynamoDB."""
    given = os.environ | dict(credentials or {})
    session = boto3.session.Session(
        aws_access_key_id=given.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=given.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=given.get("AWS_SESSION_TOKEN"),
        region_name=given.get("AWS_DEFAULT_REGION"),
    )
    return session.client("dynamodb", endpoint_url=endpoint, config=config)
