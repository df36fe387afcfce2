"""The clients' SigV4 against a verifier: the dev server with ClientAuth
AWS_IAM checks each signature as API Gateway does. Every route, names of
every allowed character, a query string (list, with a cursor), bodies; and a
wrong secret, a wrong region and a skewed clock, each refused with the code
API Gateway answers them with. The Python client (threads and asyncio) and
the command line here; the Node client in client-node/test/devserver/signing.test.ts,
which this file runs."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import botocore.session
import pytest

from idblocks import AsyncSequence, AuthError, HttpBackend, IamAuth, Sequence
from idblocks.async_backend import AsyncHttpBackend
from idblocks.cli import main as cli_main
from localrun.environment import scrubbed_environment
from tests.support.node import NODE_DIR, needs_node_client, run_node_tests
from tests.support.signing import ACCESS_KEY, REGION, SECRET_KEY, SERVER_ENV, skewed

EVERY_CHARACTER = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"


def names(prefix: str) -> list[str]:
    """Names of every allowed character, dots first included, the longest; one set per test."""
    return [prefix + EVERY_CHARACTER, ".." + prefix, "." + prefix + "-_", (prefix * 128)[:128]]


NODE_TESTS = NODE_DIR / "dist" / "test" / "devserver" / "signing.test.js"


def credentials(secret_key: str = SECRET_KEY) -> botocore.session.Session:
    session = botocore.session.Session()
    session.set_credentials(ACCESS_KEY, secret_key)
    return session


def signed_backend(url: str, secret_key: str = SECRET_KEY, region: str = REGION) -> HttpBackend:
    return HttpBackend(url, auth=IamAuth(region=region, session=credentials(secret_key)))


MISTAKES = {
    "a wrong secret": {"secret_key": "not-" + SECRET_KEY},
    "a wrong region": {"region": "us-west-2"},
    "a clock seven minutes behind": {"minutes": -7},
    "a clock seven minutes ahead": {"minutes": 7},
}


def made_with(mistake: dict) -> tuple[dict, float]:
    """The backend's arguments and the clock's offset of a mistake."""
    arguments = {key: value for key, value in mistake.items() if key != "minutes"}
    return arguments, mistake.get("minutes", 0)


# -- Python, threads ---------------------------------------------------------------


def test_every_route_of_the_python_client_is_signed_as_api_gateway_checks(iam):
    backend = signed_backend(iam.url)
    for name in names("p"):
        assert backend.next(name) == 1
        block = backend.allocate(name, 3)
        assert (block.start, block.end) == (2, 4)
        assert backend.get(name)["next"] == 5
        assert backend.set_next(name, 10)["next"] == 10
        assert backend.update(name, cache=2)["cache"] == 2
    created = backend.create("py-signed-admin", start=100, max_id=1000)
    assert created["next"] == 100
    listed, cursor = [], None
    while True:  # a query string, and a cursor in it
        page = backend.list(limit=1, cursor=cursor)
        listed += [counter["name"] for counter in page["counters"]]
        cursor = page["cursor"]
        if not cursor:
            break
    assert {*names("p"), "py-signed-admin"} <= set(listed)
    backend.delete("py-signed-admin")
    with Sequence(backend, "py-signed-sequence", block_size=5) as ids:
        assert [ids.next_id() for _ in range(7)] == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_python_client_signing_wrongly_is_refused_with_the_gateways_code(iam, mistake):
    arguments, minutes = made_with(MISTAKES[mistake])
    backend = signed_backend(iam.url, **arguments)
    with skewed(minutes), pytest.raises(AuthError) as refused:
        backend.allocate("py-refused", 3)
    assert (refused.value.status, refused.value.code) == (403, "invalid_signature")


# -- Python, asyncio -------------------------------------------------------------------


def async_backend(url: str, secret_key: str = SECRET_KEY, region: str = REGION) -> AsyncHttpBackend:
    return AsyncHttpBackend(url, auth=IamAuth(region=region, session=credentials(secret_key), lazy=True))


def test_the_async_client_is_signed_as_api_gateway_checks(iam):
    async def main() -> tuple[list[tuple[int, int]], list[int]]:
        backend = async_backend(iam.url)
        try:
            blocks = [await backend.allocate(name, 4) for name in names("a")]
            async with AsyncSequence(backend, "async-signed", block_size=3) as ids:
                drawn = [await ids.next_id() for _ in range(5)]
        finally:
            await backend.aclose()
        return [(block.start, block.end) for block in blocks], drawn

    blocks, drawn = asyncio.run(main())
    assert blocks == [(1, 4)] * len(names("a"))
    assert drawn == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_async_client_signing_wrongly_is_refused_with_the_gateways_code(iam, mistake):
    arguments, minutes = made_with(MISTAKES[mistake])

    async def main() -> None:
        backend = async_backend(iam.url, **arguments)
        try:
            await backend.allocate("async-refused", 3)
        finally:
            await backend.aclose()

    with skewed(minutes), pytest.raises(AuthError) as refused:
        asyncio.run(main())
    assert (refused.value.status, refused.value.code) == (403, "invalid_signature")


# -- the command line ------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`idblocks ...` as a shell runs it, with the dev server's credentials in its environment."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "idblocks"), *args],  # this environment's, as .venv/bin's
        env=scrubbed_environment() | SERVER_ENV | (env or {}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_line_signs_as_api_gateway_checks(iam):
    base = ("--endpoint", iam.url, "--auth", "iam")
    for name in names("c"):
        done = cli(*base, "next", name)
        assert json.loads(done.stdout) == {"counter": name, "id": 1}, done.stderr
        done = cli(*base, "batch", name, "10")
        assert json.loads(done.stdout)["end"] == 11, done.stderr
    done = cli(*base, "create", "cli-signed", "--start", "7")
    assert json.loads(done.stdout)["next"] == 7, done.stderr
    done = cli(*base, "list", "--limit", "1", "--all")  # follows the cursors
    assert "cli-signed" in {counter["name"] for counter in json.loads(done.stdout)["counters"]}, done.stderr
    assert cli(*base, "delete", "cli-signed").returncode == 0


@pytest.mark.parametrize(
    ("args", "env"),
    [((), {"AWS_SECRET_ACCESS_KEY": "not-" + SECRET_KEY}), (("--region", "us-west-2"), {})],
    ids=["a wrong secret", "a wrong region"],
)
def test_the_command_line_signing_wrongly_is_refused_with_the_gateways_code(iam, args, env):
    done = cli("--endpoint", iam.url, "--auth", "iam", *args, "next", "cli-refused", env=env)
    assert done.returncode == 2
    assert "invalid_signature" in done.stderr
    assert "(HTTP 403)" in done.stderr


def test_the_command_line_with_a_skewed_clock_is_refused(iam, monkeypatch, capsys):
    """In this process, to move botocore's clock (a shell cannot)."""
    for name, value in SERVER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with skewed(-7), pytest.raises(SystemExit) as ended:
        cli_main(["--endpoint", iam.url, "--auth", "iam", "next", "cli-skewed"])
    assert ended.value.code == 2
    assert re.search(r"invalid_signature: Signature expired: .* is now earlier than", capsys.readouterr().err)


# -- Node ---------------------------------------------------------------------------------


@needs_node_client(NODE_TESTS)
def test_the_node_client_is_signed_as_api_gateway_checks(iam):
    env = {"IDBLOCKS_IAM_URL": iam.url, "IDBLOCKS_IAM_REGION": REGION}
    env |= {"IDBLOCKS_IAM_ACCESS_KEY": ACCESS_KEY, "IDBLOCKS_IAM_SECRET_KEY": SECRET_KEY}
    run_node_tests(NODE_TESTS, env, passed=6)
