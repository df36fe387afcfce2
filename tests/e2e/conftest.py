"""The end-to-end suite's target: --base-url or IDBLOCKS_E2E_URL when given
(a deployed stack, or any running server), else a dev server of its own with
a fresh state file, started once for the session, that authenticates as a
deployed stack does (ClientAuth AWS_IAM) with a client and an admin identity
(the stack's ClientPolicy and AdminPolicy). A URL given is a server
that takes no signature unless it is said to be a deployed stack's:
--deployed (with --region), or IDBLOCKS_E2E_DEPLOYED=1 as make test-deployed
sets it."""

from __future__ import annotations

import itertools
import os
import secrets
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e.target import (
    DEPLOYED_VARIABLE,
    REGION_VARIABLE,
    URL_VARIABLE,
    ClientPrincipal,
    Identities,
    Target,
)
from tests.support.signing import iam_dev_server, identity


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--base-url", default=None, help=f"run tests/e2e against this URL (or set {URL_VARIABLE})"
    )
    parser.addoption(
        "--deployed",
        action="store_true",
        help=f"the URL is a deployed stack's: sign with SigV4 (or set {DEPLOYED_VARIABLE}=1)",
    )
    parser.addoption("--region", default=None, help=f"a deployed stack's region (or set {REGION_VARIABLE})")


# The dev server's region, and the counters its client identity may take IDs
# from (ClientCounters): those of tests/e2e/test_least_privilege.py's client.
DEV_REGION = "us-east-1"
DEV_CLIENT_COUNTERS = "e2e-client-*"


def key_pair() -> tuple[str, str]:
    """A key pair for this session's dev server only."""
    return "AKIA" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30)


@pytest.fixture(scope="session")
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, run_id: str
) -> Iterator[Target]:
    url = request.config.getoption("--base-url", default=None) or os.environ.get(URL_VARIABLE)
    if url:
        if request.config.getoption("--deployed", default=False):
            yield Target.deployed(url, request.config.getoption("--region", default=None))
        else:
            yield Target.from_environment(url)
        return
    own, client, admin = key_pair(), key_pair(), key_pair()
    identities = Identities(
        ClientPrincipal(None, None, f"e2e-client-{run_id}", f"e2e-other-{run_id}", key=client),
        DEV_CLIENT_COUNTERS,
        admin,
    )
    args = [
        *("--parameter", f"ClientCounters={DEV_CLIENT_COUNTERS}"),
        *identity("client", client),
        *identity("admin", admin),
    ]
    env = {"AWS_ACCESS_KEY_ID": own[0], "AWS_SECRET_ACCESS_KEY": own[1], "AWS_REGION": DEV_REGION}
    state = tmp_path_factory.mktemp("e2e-devserver") / "state.json"
    with iam_dev_server(state, env, args=args) as server:
        yield Target.dev_server(server.url, own, DEV_REGION, identities)


@pytest.fixture(scope="session")
def run_id() -> str:
    """Made when the session starts, so two runs against one stack never
    share a counter."""
    return uuid.uuid4().hex[:10]


_numbers = itertools.count(1)


@pytest.fixture
def counter(run_id: str, request: pytest.FixtureRequest) -> str:
    """A counter name of this run and this test, not created yet."""
    return f"e2e-{run_id}-{next(_numbers)}-{request.node.originalname}"[:128]


@pytest.fixture
def created(target: Target, counter: str) -> Iterator[str]:
    """The test's counter, created through the admin API (a stack may run
    with AutoCreateCounters=false); deleted afterwards to keep lists short."""
    reply = target.call("POST", "/admin/counters", {"name": counter})
    assert reply.status_code == 201, reply.text
    yield counter
    target.call("DELETE", f"/admin/counters/{counter}")
