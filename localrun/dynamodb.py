"""An embedded DynamoDB for local runs: moto in server mode on loopback.

moto's server answers requests on many threads and its DynamoDB model does not
lock, so two writes to one item at the same moment could interleave (the
in-process ``mock_aws`` was seen to lose concurrent updates). Real DynamoDB
applies each item write atomically; here every request is served under one
lock, which gives the same guarantee. It is the reason this module exists
instead of a bare ``ThreadedMotoServer``.
"""

from __future__ import annotations

import os
import threading
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
