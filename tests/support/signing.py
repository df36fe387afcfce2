"""Requests signed with SigV4 as a client signs them (botocore's signer), and
the credentials a dev server checking them is started with, for the tests of
the dev server's authentication."""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote, unquote, urlsplit

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


def iam_dev_server(
    state_file: Path, env: dict[str, str] = SERVER_ENV, *, args: Sequence[str] = ()
) -> DevServer:
    """A fresh dev server that checks SigV4 as API Gateway does
    (ClientAuth AWS_IAM), against the credentials in ``env``; ``args``: its
    other arguments (parameters, identities)."""
    return DevServer("--fresh", "--parameter", "ClientAuth=AWS_IAM", *args, state_file=state_file, env=env)


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


# Identities (--identity ROLE=KEY:SECRET): keys whose requests are evaluated
# against a policy, apart from the dev server's own.
CLIENT_KEY = ("AKIACLIENTIDENTITY01", "client-identity-secret")
ADMIN_KEY = ("AKIAADMINIDENTITY001", "admin-identity-secret")


def sigv4_query(query: str) -> str:
    """``query`` as a client signs the URL it sends: each name and value
    decoded, then encoded the one SigV4 way (as API Gateway reads it)."""
    return "&".join(
        "=".join(quote(unquote(piece), safe="-_.~") for piece in pair.split("=", 1))
        for pair in query.split("&")
        if pair
    )


def identity(
    role: str, key: tuple[str, str], account: str | None = None, organization: str | None = None
) -> list[str]:
    """The dev server's arguments that give ``key`` the policy of ``role``,
    a principal of ``account`` in ``organization`` when given."""
    where = (f"@{account}" if account else "") + (f"/{organization}" if organization else "")
    return ["--identity", f"{role}={key[0]}:{key[1]}{where}"]


@dataclass(frozen=True)
class RawReply:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


def send_target(
    url: str, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> RawReply:
    """``method`` with exactly ``target`` on its request line, to the server
    at ``url``: HTTP clients normalise what they send (merge "//", drop a
    fragment), and the odd targets are what a test needs to send."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        sent = {"Host": parts.netloc, "Content-Length": str(len(body))} | (headers or {})
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        reply = connection.getresponse()
        return RawReply(reply.status, dict(reply.getheaders()), json.loads(reply.read() or b"{}"))
    finally:
        connection.close()
