"""A least-privileged client: with only what the stack's client policy
grants (execute-api:Invoke on next and batch of its counters), it takes IDs
from its counter, and is refused everything else: the admin routes, a
counter its policy does not name, and the functions themselves (no
lambda:InvokeFunction, so it cannot hand a function an event it wrote).
What AWS enforces here is also read from the template in
tests/infra/test_policies.py; this is the same, asked of AWS or of the dev
server, which evaluates the stack's policies as IAM does.

Against the suite's own dev server (make test) the client and the admin are
its identities (tests/e2e/conftest.py): the stack's ClientPolicy, with
ClientCounters e2e-client-*, and its AdminPolicy; the admin calls the admin
routes and takes no IDs. The dev server runs no Lambda API: the direct
invocation is a deployed stack's to show.

Against a deployed stack, only with a client principal: make test-deployed
STACK=... CLIENT_ROLE=<a role with only ClientPolicyArn attached>
CLIENT_COUNTER=<a counter it names> OTHER_COUNTER=<one it does not>. Another
counter's refusal is skipped when the stack's ClientCounters (read from the
stack, or CLIENT_COUNTERS=) names every counter or the other one as well:
the policy then grants it.

Callers of other accounts, as the API's resource policy lets them in
(CallerOrganizationId, CallerAccounts) and keeps them to a private API's
endpoints: against the suite's dev server, which serves a private API with
both set, a caller of a member account and one of a listed account take
IDs and are refused the admin routes, one of an account outside both is
refused, and a request through an endpoint the API does not list is
refused, the dev server's own too. Against a deployed stack, with a role of
another account the stack lets in: make test-deployed STACK=...
OTHER_ACCOUNT_ROLE=<a role of that account with the CallerPolicy output as
its policy> (or OTHER_ACCOUNT_PROFILE=) OTHER_ACCOUNT_COUNTER=<a counter
ClientCounters names>."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import pytest
import requests

from tests.e2e.deployed import STACK_VARIABLE
from tests.e2e.target import CLIENT_COUNTERS_VARIABLE, ClientPrincipal, Target

ADMIN_CALLS = [
    ("POST", "/admin/counters", {"name": "e2e-never"}),
    ("GET", "/admin/counters", None),
    ("GET", "/admin/counters/{counter}", None),
    ("PUT", "/admin/counters/{counter}", {"next": 10**12}),
    ("DELETE", "/admin/counters/{counter}", None),
]


@pytest.fixture(scope="module")
def principal(target: Target) -> ClientPrincipal:
    found = target.identities.client if target.identities else ClientPrincipal.from_environment()
    if found is None:
        pytest.skip("no least-privileged client principal given")
    return found


@pytest.fixture(scope="module")
def client_counters(target: Target) -> str | None:
    """The stack's ClientCounters, when known."""
    return (
        target.identities.client_counters if target.identities else os.environ.get(CLIENT_COUNTERS_VARIABLE)
    )


@pytest.fixture(scope="module")
def client(target: Target, principal: ClientPrincipal) -> Target:
    """The target, next and batch signed as the client principal; the admin
    routes signed as it too (it must be refused them)."""
    auth = principal.auth(region=target.region)
    return Target(target.url, auth, auth, target.region)


@pytest.fixture(scope="module")
def counters(target: Target, principal: ClientPrincipal) -> Iterator[None]:
    """Both counters exist (created with the runner's own admin rights when
    missing): a refusal is then the policy's, never a 404."""
    made = []
    for name in (principal.counter, principal.other_counter):
        reply = target.call("POST", "/admin/counters", {"name": name})
        assert reply.status_code in (201, 409), reply.text
        if reply.status_code == 201:
            made.append(name)
    yield
    for name in made:
        target.call("DELETE", f"/admin/counters/{name}")


def test_the_client_takes_ids_from_its_counter_by_next_and_batch(client, principal, counters):
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = client.call("POST", f"/counters/{principal.counter}/next", headers=key)
    assert first.status_code == 200, first.text
    block = client.call("POST", f"/counters/{principal.counter}/batch", {"count": 5})
    assert block.status_code == 200, block.text
    assert block.json()["start"] > first.json()["id"]


@pytest.mark.parametrize("route", ["next", "batch"])
def test_the_client_is_refused_a_counter_its_policy_does_not_name(
    client, principal, counters, client_counters, route
):
    if principal.may_take_from_other_counter(client_counters):
        pytest.skip(
            f"the stack's ClientCounters is {client_counters!r}, which names {principal.other_counter!r} "
            "too: its client policy grants that counter, so there is no refusal to show (deploy with "
            "ClientCounters naming fewer counters, or give OTHER_COUNTER outside it)"
        )
    reply = client.call(
        "POST", f"/counters/{principal.other_counter}/{route}", {"count": 1} if route == "batch" else None
    )
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == "access_denied"


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS, ids=[f"{m} {p}" for m, p, _ in ADMIN_CALLS])
def test_the_client_is_refused_every_admin_route(client, principal, counters, method, path, body):
    reply = client.call(method, path.format(counter=principal.counter), body)
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == "access_denied"


def test_the_client_cannot_invoke_a_function_directly(target, principal, counters):
    """With lambda:InvokeFunction it could send a function an event naming
    any caller; it holds none."""
    if target.identities is not None:
        pytest.skip(
            "the dev server runs no Lambda API: a deployed stack shows it (make test-deployed STACK=...)"
        )
    stack = os.environ.get(STACK_VARIABLE)
    if not stack:
        pytest.skip("the functions' names come from the stack: give STACK")
    import boto3
    from botocore.exceptions import ClientError

    # CloudFormation names the function: read its name with the runner's credentials.
    cloudformation = boto3.client("cloudformation", region_name=target.region)
    resource = cloudformation.describe_stack_resource(StackName=stack, LogicalResourceId="NextFunction")
    function = resource["StackResourceDetail"]["PhysicalResourceId"]
    lambda_client = principal.session().create_client("lambda", region_name=target.region)
    event = {"requestContext": {"stage": "v1", "apiId": "forged"}, "httpMethod": "POST"}
    with pytest.raises(ClientError) as refused:
        lambda_client.invoke(FunctionName=f"{function}:live", Payload=json.dumps(event).encode())
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"


def test_an_unsigned_request_is_refused(target, principal, counters):
    reply = requests.post(f"{target.url}/counters/{principal.counter}/next", timeout=30)
    assert reply.status_code == 403


# -- the admin: the admin routes, and no IDs ------------------------------------------


@pytest.fixture(scope="module")
def admin(target: Target) -> Target:
    """The target signed as a least-privileged admin (the stack's AdminPolicy
    only): the dev server's admin identity; a deployed stack gives none."""
    if target.identities is None:
        pytest.skip("no least-privileged admin principal given (the suite's dev server has one)")
    auth = target.identities.admin_auth(target.region)
    return Target(target.url, auth, auth, target.region)


def test_the_admin_calls_every_admin_route(admin, run_id):
    name = f"e2e-admin-{run_id}"
    created = admin.call("POST", "/admin/counters", {"name": name, "start": 10})
    assert created.status_code == 201, created.text
    assert admin.call("GET", f"/admin/counters/{name}").json()["next"] == 10
    assert admin.call("GET", "/admin/counters").status_code == 200
    assert admin.call("PUT", f"/admin/counters/{name}", {"next": 20}).json()["next"] == 20
    assert admin.call("DELETE", f"/admin/counters/{name}").status_code == 204


@pytest.mark.parametrize("route", ["next", "batch"])
def test_the_admin_takes_no_ids(admin, principal, counters, route):
    reply = admin.call(
        "POST", f"/counters/{principal.counter}/{route}", {"count": 1} if route == "batch" else None
    )
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == "access_denied"


# -- callers of other accounts, and a private API's endpoints -------------------------


def caller_of(target: Target, name: str) -> ClientPrincipal:
    """The dev server's caller ``name`` of another account; against a
    deployed stack, the role given for another account it lets in."""
    if target.identities is not None:
        return target.identities.callers[name]
    found = ClientPrincipal.of_another_account()
    if found is None or name != "member":
        pytest.skip(
            "no caller of another account given (OTHER_ACCOUNT_ROLE= or OTHER_ACCOUNT_PROFILE=, with "
            "OTHER_ACCOUNT_COUNTER=)"
            if found is None
            else "a deployed stack shows one account of those it lets in: the one given (OTHER_ACCOUNT_ROLE)"
        )
    return found


def signed_as(target: Target, principal: ClientPrincipal) -> Target:
    auth = principal.auth(region=target.region)
    return Target(target.url, auth, auth, target.region)


@pytest.fixture(scope="module")
def their_counter(target: Target) -> Iterator[str]:
    """The counter callers of other accounts take IDs from (created with the
    runner's own rights when missing): one ClientCounters names."""
    if target.identities is not None:
        name = target.identities.client.counter
    else:
        found = ClientPrincipal.of_another_account()
        if found is None:
            pytest.skip("no caller of another account given (OTHER_ACCOUNT_ROLE= or OTHER_ACCOUNT_PROFILE=)")
        name = found.counter
    reply = target.call("POST", "/admin/counters", {"name": name})
    assert reply.status_code in (201, 409), reply.text
    yield name
    if reply.status_code == 201:
        target.call("DELETE", f"/admin/counters/{name}")


@pytest.mark.parametrize("name", ["member", "listed"])
def test_a_caller_of_an_account_the_stack_lets_in_takes_ids_by_next_and_batch(target, their_counter, name):
    """A role of another account of the Organization (CallerOrganizationId),
    or of a listed account (CallerAccounts), with the CallerPolicy output as
    its own policy: cross-account, its policy and the API's both allow."""
    caller = signed_as(target, caller_of(target, name))
    first = caller.call(
        "POST", f"/counters/{their_counter}/next", headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert first.status_code == 200, first.text
    block = caller.call("POST", f"/counters/{their_counter}/batch", {"count": 5})
    assert block.status_code == 200, block.text
    assert block.json()["start"] > first.json()["id"]


@pytest.mark.parametrize("name", ["member", "listed"])
@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS, ids=[f"{m} {p}" for m, p, _ in ADMIN_CALLS])
def test_a_caller_of_another_account_is_refused_every_admin_route(
    target, their_counter, name, method, path, body
):
    caller = signed_as(target, caller_of(target, name))
    reply = caller.call(method, path.format(counter=their_counter), body)
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == "access_denied"


def test_a_caller_of_an_account_the_stack_does_not_let_in_is_refused(target, their_counter):
    """Its own policy allows next and batch; the API's does not let its
    account in (another Organization, not listed)."""
    caller = signed_as(target, caller_of(target, "outsider"))
    for route, body in (("next", None), ("batch", {"count": 1})):
        reply = caller.call("POST", f"/counters/{their_counter}/{route}", body)
        assert reply.status_code == 403, reply.text
        assert reply.json()["error"]["code"] == "access_denied"


def test_a_private_api_refuses_a_request_through_an_endpoint_it_does_not_list(
    through_unlisted_endpoint, run_id
):
    """The same identities, through another endpoint: refused with an
    explicit deny, whoever signs, the stack's own account included."""
    identities = through_unlisted_endpoint.identities
    assert identities is not None
    signers = [through_unlisted_endpoint, signed_as(through_unlisted_endpoint, identities.client)]
    signers.append(signed_as(through_unlisted_endpoint, identities.callers["member"]))
    for signer in signers:
        for method, path, body in (("POST", f"/counters/e2e-client-{run_id}/next", None), *ADMIN_CALLS[:2]):
            reply = signer.call(method, path, body)
            assert reply.status_code == 403, reply.text
            assert reply.json()["error"]["code"] == "access_denied"
            assert "with an explicit deny" in reply.json()["error"]["message"]
