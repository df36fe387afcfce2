"""An embedded DynamoDB for local runs: moto in server mode on loopback.

moto's server answers requests on many threads and its DynamoDB model does not
lock, so two writes to one item at the same moment could interleave (the
in-process ``mock_aws`` was seen to lose concurrent updates). Real DynamoDB
applies each item write atomically; here every request is served under one
lock, which gives the same guarantee. It is the reason this module exists
instead of a bare ``ThreadedMotoServer``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.dynamodb.models import dynamodb_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from devserver.template import Template

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


class _QuietHandler(MotoRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # the dev server logs API requests, not every DynamoDB call


class EmbeddedDynamoDB:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._app = _OneAtATime(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            host, port, self._app, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="dynamodb", daemon=True)

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


def client(endpoint: str, config: Config | None = None) -> Any:
    return boto3.session.Session().client("dynamodb", endpoint_url=endpoint, config=config)


def create_tables(dynamodb: Any, template: Template, names: dict[str, str]) -> list[str]:
    """Create the template's tables (those not there yet); returns the ones created."""
    existing = set(dynamodb.list_tables()["TableNames"])
    created = []
    for logical_id, table_name in names.items():
        if table_name in existing:
            continue
        try:
            dynamodb.create_table(**template.create_table_kwargs(logical_id, table_name))
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
            continue  # another dev server created it first
        dynamodb.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1})
        ttl = template.ttl_attribute(logical_id)
        if ttl:
            dynamodb.update_time_to_live(
                TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
            )
        created.append(table_name)
    return created


def load_items(dynamodb: Any, table_name: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        pending = {table_name: batch}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
