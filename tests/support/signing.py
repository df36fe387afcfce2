"""Requests signed with SigV4 as a client signs them (botocore's signer), and
the credentials a dev server checking them is started with, for the tests of
the dev server's authentication."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devserver.process import DevServer

ACCESS_KEY = "AKIADEVSERVERTEST01"
SECRET_KEY = "dev-server-test-secret/with+odd=characters"
REGION = "eu-west-1"
TOKEN = "dev-server-test-session-token"

# What a dev server checking these credentials is started with.
SERVER_ENV = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}
# Temporary credentials: the same pair with a session token.
SESSION_ENV = SERVER_ENV | {"AWS_SESSION_TOKEN": TOKEN}


def iam_dev_server(state_file: Path, env: dict[str, str] = SERVER_ENV) -> DevServer:
    """A fresh dev server that checks SigV4 as API Gateway does
    (ClientAuth AWS_IAM), against the credentials in ``env``."""
    return DevServer("--fresh", "--parameter", "ClientAuth=AWS_IAM", state_file=state_file, env=env)


def skewed(minutes: float) -> contextlib.AbstractContextManager[object]:
    """botocore signs with a clock ``minutes`` off (negative: behind)."""
    when = datetime.now(UTC) + timedelta(minutes=minutes)
    return mock.patch("botocore.auth.get_current_datetime", return_value=when)


def sign(
    method: str,
    url: str,
    body: bytes = b"",
    *,
    access_key: str = ACCESS_KEY,
    secret_key: str = SECRET_KEY,
    token: str | None = None,
    region: str = REGION,
    service: str = "execute-api",
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """The headers of ``method url`` signed as botocore signs a request."""
    request = AWSRequest(
        method=method, url=url, data=body, headers={"Content-Type": "application/json"} | (headers or {})
    )
    SigV4Auth(Credentials(access_key, secret_key, token), service, region).add_auth(request)
    return dict(request.headers.items())


def send(
    method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> requests.Response:
    return requests.request(method, url, data=body, headers=headers or {}, timeout=30)
