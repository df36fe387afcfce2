"""Who may call the API from other accounts of the Organization, from listed
accounts, and through which VPC endpoints, as AWS decides it from the
deployed template (the SAM transform's output, tests/support/sam.py) for the
parameter sets that change it: the caller's IAM policy and the API's
resource policy, evaluated by an IAM policy evaluator (tests/support/iam.py)
with the request's condition keys, combined as API Gateway combines them for
IAM auth (a caller of the API's own account needs either to allow, a caller
of another account both; an explicit deny wins), which is how the evaluator
decides a resource with a resource policy too. Every request of the module
is decided by one run of the evaluator.

A stack here is idblocks in us-east-1 of account 123456789012, in the
Organization o-abcdefghij, its REST API's id a1b2c3d4e5."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localrun.template import Template
from tests.infra.test_policies import ACCOUNT, API_ID, REGION, managed_policy, resolved, route_arn, stack
from tests.support.iam import ALLOWED, ANONYMOUS, Request, decide, principal_context
from tests.support.sam import translate

ORGANIZATION = "o-abcdefghij"
MEMBER, LISTED, OUTSIDER = "210987654321", "111122223333", "444455556666"
LISTED_ORGANIZATION, OUTSIDE_ORGANIZATION = "o-listedlisted", "o-elsewhere00"
ENDPOINT, OTHER_ENDPOINT, UNLISTED_ENDPOINT = "vpce-0123456789abcdef0", "vpce-11112222", "vpce-99998888"
INVOKE = "execute-api:Invoke"
DENIED, EXPLICIT = "ImplicitlyDenied", "ExplicitlyDenied"

# The parameter sets: the stack's own account is listed as well, to show
# that naming it lets no principal of it in without its policy.
CALLERS = {"CallerOrganizationId": ORGANIZATION, "CallerAccounts": f"{LISTED},{ACCOUNT}"}
PRIVATE = {"EndpointType": "PRIVATE", "VpcEndpointIds": f"{ENDPOINT},{OTHER_ENDPOINT}"}
PRIVATE_CALLERS = CALLERS | PRIVATE | {"ClientCounters": "team-a-*", "AllowGetNext": "false"}
UNSIGNED_PRIVATE = PRIVATE | {"ClientAuth": "NONE"}
SETS = {
    "none": {},
    "callers": CALLERS,
    "private callers": PRIVATE_CALLERS,
    "unsigned private": UNSIGNED_PRIVATE,
}

NEXT, GET_NEXT, BATCH = (
    ("POST", "/counters/{name}/next"),
    ("GET", "/counters/{name}/next"),
    ("POST", "/counters/{name}/batch"),
)
ADMIN = [
    ("POST", "/admin/counters"),
    ("GET", "/admin/counters"),
    ("GET", "/admin/counters/{name}"),
    ("PUT", "/admin/counters/{name}"),
    ("DELETE", "/admin/counters/{name}"),
]
EVERY_ROUTE = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": INVOKE, "Resource": "*"}]}


def role(account: str) -> str:
    return f"arn:aws:iam::{account}:role/orders-service"


def api_policy(parameters: dict[str, str]) -> dict[str, Any] | None:
    """The API's resource policy as API Gateway stores it: its shorthand
    ARNs ("execute-api:/...") written out for this API (API Gateway
    developer guide, "API Gateway resource policy examples")."""
    body = translate(**parameters)["Resources"]["Api"]["Properties"]["Body"]
    policy = body.get("x-amazon-apigateway-policy")
    if policy is None:
        return None
    text = json.dumps(resolved(policy, stack(**parameters)["names"]))
    return json.loads(text.replace('"execute-api:/', f'"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/'))


def caller_policy(parameters: dict[str, str]) -> dict[str, Any]:
    """The CallerPolicy output: the policy a caller's account attaches."""
    output = translate(**parameters)["Outputs"]["CallerPolicy"]["Value"]
    return json.loads(resolved(output, stack(**parameters)["names"]))


# -- every request of the module, decided at once -------------------------------------


def cases() -> dict[str, tuple[str, Request]]:
    """Each case: its name -> (the decision AWS makes, the request)."""
    made: dict[str, tuple[str, Request]] = {}

    def case(name, expected, parameters, who, route, counter="orders", vpce=None):
        """``who``: (the principal, its Organization, its own policies)."""
        principal, org, policies = who
        context = {} if principal is ANONYMOUS else principal_context(principal, org)
        if vpce:
            context["aws:SourceVpce"] = vpce
        arn = route_arn(*route, counter)
        request = Request(principal, INVOKE, arn, ACCOUNT, tuple(policies), api_policy(parameters), context)
        made[name] = (expected, request)

    for set_name in ("none", "callers"):
        parameters = SETS[set_name]
        client = managed_policy(stack(**parameters), "ClientPolicy")
        admin = managed_policy(stack(**parameters), "AdminPolicy")
        own = {
            "client": (role(ACCOUNT), ORGANIZATION, [client]),
            "none": (role(ACCOUNT), ORGANIZATION, []),
            "admin": (role(ACCOUNT), ORGANIZATION, [admin]),
        }
        for route in (NEXT, GET_NEXT, BATCH):
            case(f"{set_name}: own client {route}", ALLOWED, parameters, own["client"], route)
            case(f"{set_name}: own none {route}", DENIED, parameters, own["none"], route)
            case(f"{set_name}: own admin {route}", DENIED, parameters, own["admin"], route)
        for route in ADMIN:
            case(f"{set_name}: own admin {route}", ALLOWED, parameters, own["admin"], route)
            case(f"{set_name}: own client {route}", DENIED, parameters, own["client"], route)
    # no resource policy: no other account, whatever its own policy says
    client = managed_policy(stack(), "ClientPolicy")
    for route in (NEXT, BATCH):
        for policy in (client, EVERY_ROUTE):
            case(
                f"none: member {policy == client} {route}",
                DENIED,
                {},
                (role(MEMBER), ORGANIZATION, [policy]),
                route,
            )

    caller = caller_policy(CALLERS)
    member, listed = (role(MEMBER), ORGANIZATION), (role(LISTED), LISTED_ORGANIZATION)
    for route in (NEXT, GET_NEXT, BATCH):
        case(f"callers: member takes {route}", ALLOWED, CALLERS, (*member, [caller]), route)
        case(f"callers: member no-policy {route}", DENIED, CALLERS, (*member, []), route)
        case(
            f"callers: outsider {route}",
            DENIED,
            CALLERS,
            (role(OUTSIDER), OUTSIDE_ORGANIZATION, [caller]),
            route,
        )
        case(f"callers: listed takes {route}", ALLOWED, CALLERS, (*listed, [caller]), route)
        case(f"callers: listed no-policy {route}", DENIED, CALLERS, (*listed, []), route)
    for route in ADMIN:
        for name, who in (("member", member), ("listed", listed)):
            case(f"callers: {name} admin {route}", EXPLICIT, CALLERS, (*who, [caller]), route)
            case(f"callers: {name} admin every {route}", EXPLICIT, CALLERS, (*who, [EVERY_ROUTE]), route)

    parameters = PRIVATE_CALLERS
    callers = {
        "own": (role(ACCOUNT), ORGANIZATION, [managed_policy(stack(**parameters), "ClientPolicy")]),
        "member": (*member, [caller_policy(parameters)]),
        "listed": (role(LISTED), None, [caller_policy(parameters)]),
    }
    every = (*member, [EVERY_ROUTE])
    for route in (NEXT, BATCH):
        for name, who in callers.items():
            for vpce in (ENDPOINT, OTHER_ENDPOINT):
                case(f"private: {name} {vpce} {route}", ALLOWED, parameters, who, route, "team-a-x", vpce)
            for vpce in (UNLISTED_ENDPOINT, None):
                case(f"private: {name} {vpce} {route}", EXPLICIT, parameters, who, route, "team-a-x", vpce)
        # other accounts take only ClientCounters' counters, and no GET next here
        case(f"private: member every orders {route}", DENIED, parameters, every, route, "orders", ENDPOINT)
        case(f"private: member every team-a {route}", ALLOWED, parameters, every, route, "team-a-y", ENDPOINT)
    case("private: member every GET next", DENIED, parameters, every, GET_NEXT, "team-a-y", ENDPOINT)
    for route in ADMIN:
        case(f"private: member every {route}", EXPLICIT, parameters, every, route, vpce=ENDPOINT)

    parameters = UNSIGNED_PRIVATE
    unsigned = (ANONYMOUS, None, [])
    admin = (role(ACCOUNT), ORGANIZATION, [managed_policy(stack(**parameters), "AdminPolicy")])
    for route in (NEXT, GET_NEXT, BATCH):
        case(f"unsigned: {ENDPOINT} {route}", ALLOWED, parameters, unsigned, route, vpce=ENDPOINT)
        case(
            f"unsigned: {UNLISTED_ENDPOINT} {route}",
            EXPLICIT,
            parameters,
            unsigned,
            route,
            vpce=UNLISTED_ENDPOINT,
        )
    for route in ADMIN:
        case(f"unsigned: admin {ENDPOINT} {route}", ALLOWED, parameters, admin, route, vpce=ENDPOINT)
        case(
            f"unsigned: admin {UNLISTED_ENDPOINT} {route}",
            EXPLICIT,
            parameters,
            admin,
            route,
            vpce=UNLISTED_ENDPOINT,
        )
        case(
            f"unsigned: admin none {route}",
            DENIED,
            parameters,
            (role(ACCOUNT), None, []),
            route,
            vpce=ENDPOINT,
        )
    return made


@pytest.fixture(scope="module")
def decided() -> dict[str, tuple[str, str]]:
    """Each case: its name -> (the decision expected, the evaluator's)."""
    made = cases()
    decisions = decide(request for _, request in made.values())
    return {
        name: (expected, found) for (name, (expected, _)), found in zip(made.items(), decisions, strict=True)
    }


def assert_decided(decided: dict[str, tuple[str, str]], prefix: str) -> None:
    chosen = {name: pair for name, pair in decided.items() if name.startswith(prefix)}
    assert chosen, prefix
    wrong = {name: found for name, (expected, found) in chosen.items() if expected != found}
    assert not wrong, wrong


# -- the stack's own account --------------------------------------------------------


@pytest.mark.parametrize("set_name", ["none", "callers"])
def test_a_role_of_the_stacks_account_with_the_client_policy_may_call_next_and_batch(decided, set_name):
    assert_decided(decided, f"{set_name}: own client")


@pytest.mark.parametrize("set_name", ["none", "callers"])
def test_a_role_of_the_stacks_account_with_no_policy_may_call_nothing_though_it_is_named(decided, set_name):
    """The Organization's Allow would let every principal of the stack's own
    account in (API Gateway needs either policy to allow there); so would
    the stack's account among CallerAccounts. Each excludes that account."""
    assert_decided(decided, f"{set_name}: own none")


@pytest.mark.parametrize("set_name", ["none", "callers"])
def test_the_admin_routes_stay_the_admin_policys_in_the_stacks_account(decided, set_name):
    assert_decided(decided, f"{set_name}: own admin")


# -- other accounts -------------------------------------------------------------------


def test_without_callers_no_other_account_may_call_and_the_api_has_no_resource_policy(decided):
    """The defaults authorize as before: no resource policy, and a role of
    another account is refused whatever its own policy says."""
    assert api_policy({}) is None
    assert_decided(decided, "none: member")


def test_a_role_of_a_member_account_with_an_invoke_policy_may_call_next_and_batch(decided):
    assert_decided(decided, "callers: member takes")


def test_a_role_of_a_member_account_needs_its_own_policy_too(decided):
    assert_decided(decided, "callers: member no-policy")


def test_a_role_of_another_account_may_call_no_admin_route_and_is_denied_explicitly(decided):
    """Refused even with every route in its own policy: an explicit deny,
    whatever a later statement might allow."""
    assert_decided(decided, "callers: member admin")
    assert_decided(decided, "callers: listed admin")


def test_a_role_outside_the_organization_may_not(decided):
    assert_decided(decided, "callers: outsider")


def test_a_role_of_a_listed_account_may_call_next_and_batch(decided):
    assert_decided(decided, "callers: listed takes")
    assert_decided(decided, "callers: listed no-policy")


def test_callers_in_other_accounts_take_only_the_counters_client_counters_names(decided):
    """ClientCounters limits other accounts as it limits the stack's own:
    the resource policy names only its counters, and GET next when it is on."""
    assert_decided(decided, "private: member every")


# -- a private API ---------------------------------------------------------------------


def test_a_private_api_takes_requests_through_its_listed_endpoints(decided):
    for who in ("own", "member", "listed"):
        for vpce in (ENDPOINT, OTHER_ENDPOINT):
            assert_decided(decided, f"private: {who} {vpce}")


def test_a_private_api_refuses_a_request_through_an_endpoint_it_does_not_list(decided):
    for who in ("own", "member"):
        assert_decided(decided, f"private: {who} {UNLISTED_ENDPOINT}")
        assert_decided(decided, f"private: {who} None")


def test_a_private_api_without_iam_auth_takes_unsigned_requests_through_its_endpoints_only(decided):
    """ClientAuth NONE: next and batch take what the resource policy allows,
    through the endpoints listed; the admin routes keep their policy."""
    assert_decided(decided, "unsigned: ")


# -- what the template makes -------------------------------------------------------------


@pytest.mark.parametrize("parameters", [CALLERS, PRIVATE_CALLERS], ids=["get-next", "no-get-next"])
def test_the_caller_policy_output_is_the_client_policy(parameters):
    """What a caller's account attaches is what the stack's own callers
    attach: the same routes and counters."""
    assert caller_policy(parameters) == managed_policy(stack(**parameters), "ClientPolicy")


@pytest.mark.parametrize("set_name", sorted(SETS))
def test_the_dev_server_reads_the_resource_policy_the_transform_writes(set_name):
    """The dev server reads the statements from the template as SAM gets it
    (devserver.identities.resource_policy); SAM copies them as they are."""
    template = Template(parameter_overrides=SETS[set_name])
    auth = template.resolved.template["Resources"]["Api"]["Properties"]["Auth"]
    body = translate(**SETS[set_name])["Resources"]["Api"]["Properties"]["Body"]
    written = body.get("x-amazon-apigateway-policy", {}).get("Statement")
    assert auth.get("ResourcePolicy", {}).get("CustomStatements") == written


@pytest.mark.parametrize(
    ("parameters", "types", "endpoints", "mode"),
    [
        ({}, ["REGIONAL"], None, "STRICT"),
        (CALLERS, ["REGIONAL"], None, "STRICT"),
        (PRIVATE, ["PRIVATE"], [ENDPOINT, OTHER_ENDPOINT], "BASIC"),
    ],
)
def test_a_private_api_is_associated_with_its_endpoints_and_called_at_their_names(
    parameters, types, endpoints, mode
):
    """Associated endpoints give the API its <api-id>-<vpce-id> names, which
    STRICT access mode refuses (the TLS server name is not the API's own
    host): a private API takes BASIC, with the same enhanced TLS policy."""
    api = translate(**parameters)["Resources"]["Api"]["Properties"]
    assert api["EndpointConfiguration"]["Types"] == types
    assert api["EndpointConfiguration"].get("VpcEndpointIds") == endpoints
    assert api["EndpointAccessMode"] == mode
    assert api["SecurityPolicy"] == "SecurityPolicy_TLS13_1_3_2025_09"
    outputs = Template(parameter_overrides=parameters).kept(translate(**parameters)["Outputs"])
    assert ("PrivateApiUrl" in outputs) == (endpoints is not None)
    if endpoints:
        url = resolved(outputs["PrivateApiUrl"]["Value"], stack(**parameters)["names"])
        assert url == f"https://{API_ID}-{ENDPOINT}.execute-api.{REGION}.amazonaws.com/v1"


@pytest.mark.parametrize(
    ("parameters", "refused_by"),
    [
        ({}, []),
        (CALLERS, []),
        (PRIVATE_CALLERS, []),
        (UNSIGNED_PRIVATE, []),
        (CALLERS | {"ClientAuth": "API_KEY"}, ["OtherAccountsSign"]),
        ({"CallerAccounts": LISTED, "ClientAuth": "NONE"}, ["OtherAccountsSign"]),
        ({"EndpointType": "PRIVATE"}, ["PrivateApiNeedsEndpoints"]),
        (PRIVATE | {"CustomDomainName": "ids.example.com"}, ["PrivateApiNeedsEndpoints"]),
        ({"VpcEndpointIds": ENDPOINT}, ["EndpointsOnlyForAPrivateApi"]),
    ],
)
def test_what_would_leave_the_api_open_or_unreachable_is_refused_before_anything_is_deployed(
    parameters, refused_by
):
    """CloudFormation's rules (the template's Rules, which the transforms
    leave to it), each refusal with its reason."""
    refusals = Template(parameter_overrides=parameters).refusals()
    assert [rule for rule, _ in refusals] == refused_by
    assert all(reason.strip() for _, reason in refusals)
