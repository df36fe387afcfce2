"""The end-to-end suite's target: --base-url or IDBLOCKS_E2E_URL when given
(a deployed stack, or any running server), else a dev server of its own with
a fresh state file, started once for the session, that authenticates as a
deployed stack does (ClientAuth AWS_IAM) with a client and an admin identity
(the stack's ClientPolicy and AdminPolicy), and authorizes as a private API
shared with other accounts does (DEV_PARAMETERS), with callers of those
accounts and one of an account it does not let in. A URL given is a server
that takes no signature unless it is said to be a deployed stack's:
--deployed (with --region), or IDBLOCKS_E2E_DEPLOYED=1 as make test-deployed
sets it."""

from __future__ import annotations

import itertools
import os
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

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
# It serves as a private API of an account in an Organization, which lets in
# that Organization's other accounts and one listed account: every test goes
# through its resource policy, through an endpoint it lists.
DEV_ACCOUNT, DEV_ORGANIZATION = "123456789012", "o-e2eorganization"
MEMBER, LISTED, OUTSIDER = "210987654321", "111122223333", "444455556666"
DEV_ENDPOINT, UNLISTED_ENDPOINT = "vpce-0e2e0e2e0e2e0e2e0", "vpce-0badbadbadbadbad0"
DEV_PARAMETERS = {
    "ClientCounters": DEV_CLIENT_COUNTERS,
    "CallerOrganizationId": DEV_ORGANIZATION,
    "CallerAccounts": LISTED,
    "EndpointType": "PRIVATE",
    "VpcEndpointIds": DEV_ENDPOINT,
}
# Where each identity of another account is: (its account, its Organization).
CALLERS = {
    "member": (MEMBER, DEV_ORGANIZATION),
    "listed": (LISTED, "o-listedaccount1"),
    "outsider": (OUTSIDER, "o-elsewhere0001"),
}


def key_pair() -> tuple[str, str]:
    """A key pair for this session's dev server only."""
    return "AKIA" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30)


@dataclass(frozen=True)
class DevServerSetup:
    """How the suite's dev server is started: its own key pair, its
    identities, its arguments and environment."""

    own: tuple[str, str]
    identities: Identities
    args: tuple[str, ...]
    env: dict[str, str]


@pytest.fixture(scope="session")
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, dev_setup: DevServerSetup
) -> Iterator[Target]:
    url = request.config.getoption("--base-url", default=None) or os.environ.get(URL_VARIABLE)
    if url:
        if request.config.getoption("--deployed", default=False):
            yield Target.deployed(url, request.config.getoption("--region", default=None))
        else:
            yield Target.from_environment(url)
        return
    state = tmp_path_factory.mktemp("e2e-devserver") / "state.json"
    with iam_dev_server(state, dev_setup.env, args=dev_setup.args) as server:
        yield Target.dev_server(server.url, dev_setup.own, DEV_REGION, dev_setup.identities)


@pytest.fixture(scope="session")
def through_unlisted_endpoint(
    target: Target, dev_setup: DevServerSetup, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """The suite's dev server as requests reach it through a VPC endpoint
    the API does not list: a second one, alike but for --source-vpce."""
    if target.identities is None:
        pytest.skip("which endpoint a request comes through is chosen where it is sent from: a VPC")
    args = [UNLISTED_ENDPOINT if arg == DEV_ENDPOINT else arg for arg in dev_setup.args]
    state = tmp_path_factory.mktemp("e2e-unlisted") / "state.json"
    with iam_dev_server(state, dev_setup.env, args=args) as server:
        yield Target.dev_server(server.url, dev_setup.own, DEV_REGION, dev_setup.identities)


@pytest.fixture(scope="session")
def dev_setup(run_id: str) -> DevServerSetup:
    own, client, admin = key_pair(), key_pair(), key_pair()
    counter, other = f"e2e-client-{run_id}", f"e2e-other-{run_id}"
    callers = {name: key_pair() for name in CALLERS}
    identities = Identities(
        ClientPrincipal(None, None, counter, other, key=client),
        DEV_CLIENT_COUNTERS,
        admin,
        {name: ClientPrincipal(None, None, counter, other, key=key) for name, key in callers.items()},
    )
    args = [
        *(part for name, value in DEV_PARAMETERS.items() for part in ("--parameter", f"{name}={value}")),
        *("--account", DEV_ACCOUNT, "--organization", DEV_ORGANIZATION, "--source-vpce", DEV_ENDPOINT),
        *identity("client", client),
        *identity("admin", admin),
        *(part for name, key in callers.items() for part in identity("client", key, *CALLERS[name])),
    ]
    env = {"AWS_ACCESS_KEY_ID": own[0], "AWS_SECRET_ACCESS_KEY": own[1], "AWS_REGION": DEV_REGION}
    return DevServerSetup(own, identities, tuple(args), env)


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
