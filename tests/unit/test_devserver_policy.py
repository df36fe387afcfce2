"""The dev server's IAM evaluation (devserver/policy.py) and the stack's
policies it reads from template.yaml (devserver/identities.py): decided as
IAM decides them, and a policy it would read otherwise than AWS refused when
the dev server starts, never half-read. tests/integration/
test_devserver_policy_oracle.py holds the same evaluation to an IAM policy
evaluator on generated policies."""

from __future__ import annotations

import pytest

from devserver.identities import ApiArn, IdentitySpec, api_arn, identities_of, resource_policy, stack_policy
from devserver.policy import (
    ALLOWED,
    EXPLICITLY_DENIED,
    IMPLICITLY_DENIED,
    Decision,
    PolicyError,
    gateway_decision,
    parse,
    resource_matches,
)
from localrun.template import Template

INVOKE = "execute-api:Invoke"
API = ApiArn("eu-west-1", "123456789012", "a1b2c3d4e5", "v1")


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(resource: str | list[str], action: str | list[str] = INVOKE, **more) -> dict:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


def decide(document: dict, resource: str, action: str = INVOKE) -> str:
    return parse(document, "test policy").decide(action, resource).result


def next_of(name: str, method: str = "POST") -> str:
    return API.of(method, f"/counters/{name}/next")


# -- wildcards, as IAM reads them ---------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "allowed", "refused"),
    [
        # a dot is a dot: orders.eu is not ordersXeu
        ("counters/orders.eu/next", ["orders.eu"], ["ordersXeu", "orders", "orders.eu.x", "Orders.eu"]),
        # * is any run of characters, "/" included
        ("counters/orders*/next", ["orders", "orders.eu", "ordersXeu", "orders/x"], ["order", "x-orders"]),
        # ? is exactly one character
        ("counters/orders?eu/next", ["orders.eu", "ordersXeu", "orders-eu", "orders_eu"], ["orderseu"]),
        ("counters/a-b_c.d/next", ["a-b_c.d"], ["a-b_cXd", "aXb_c.d", "a-bXc.d"]),
        # no regular expression: + ( [ are themselves
        ("counters/a+(b)[c]/next", ["a+(b)[c]"], ["aa(b)c", "a(b)[c]"]),
    ],
)
def test_wildcards_and_dots_in_a_resource_match_as_iam_matches_them(pattern, allowed, refused):
    document = policy(allow(API.prefix + "POST/" + pattern))
    for name in allowed:
        assert decide(document, next_of(name)) == ALLOWED, name
    for name in refused:
        assert decide(document, next_of(name)) == IMPLICITLY_DENIED, name


def test_a_star_spans_slashes_across_stage_method_and_path():
    document = policy(allow(f"arn:aws:execute-api:*:*:{API.api_id}/*/next"))
    assert decide(document, next_of("orders")) == ALLOWED
    assert decide(document, API.of("GET", "/counters/x/next")) == ALLOWED
    assert decide(document, API.of("POST", "/counters/x/batch")) == IMPLICITLY_DENIED


def test_actions_fold_case_and_resources_do_not():
    upper = policy(allow(next_of("orders"), action="EXECUTE-API:invoke"))
    assert decide(upper, next_of("orders")) == ALLOWED
    lower_method = policy(allow(next_of("orders", method="post")))
    assert decide(lower_method, next_of("orders")) == IMPLICITLY_DENIED
    other_case = policy(allow(next_of("Orders")))
    assert decide(other_case, next_of("orders")) == IMPLICITLY_DENIED


@pytest.mark.parametrize(
    ("action", "decision"),
    [
        ("*", ALLOWED),
        ("execute-api:*", ALLOWED),
        ("execute-api:Inv?ke", ALLOWED),
        ("execute-api:In*", ALLOWED),
        ("execute-api:InvalidateCache", IMPLICITLY_DENIED),
        ("execute-api:Invoke?", IMPLICITLY_DENIED),
        ("s3:*", IMPLICITLY_DENIED),
        ("execute-apis:Invoke", IMPLICITLY_DENIED),
    ],
)
def test_an_action_is_matched_by_its_service_and_name(action, decision):
    assert decide(policy(allow("*", action=action)), next_of("orders")) == decision


def test_an_explicit_deny_wins_over_any_allow_in_any_order():
    deny = {"Sid": "NotEu", "Effect": "Deny", "Action": INVOKE, "Resource": next_of("orders.eu")}
    for statements in ((allow("*"), deny), (deny, allow("*"))):
        decision = parse(policy(*statements), "p").decide(INVOKE, next_of("orders.eu"))
        assert (decision.result, decision.statement.label) == (EXPLICITLY_DENIED, "statement 'NotEu'")
        assert decide(policy(*statements), next_of("orders")) == ALLOWED


def test_with_no_statement_that_allows_the_request_is_denied_and_none_decided():
    decision = parse(policy(allow(next_of("orders"))), "p").decide(INVOKE, next_of("invoices"))
    assert (decision.result, decision.statement) == (IMPLICITLY_DENIED, None)
    assert decision.because("p") == "no statement of p allows it"


def test_not_action_and_not_resource_take_everything_they_do_not_name():
    not_resource = policy({"Effect": "Allow", "Action": INVOKE, "NotResource": API.prefix + "*/admin/*"})
    assert decide(not_resource, next_of("orders")) == ALLOWED
    assert decide(not_resource, API.of("GET", "/admin/counters/x")) == IMPLICITLY_DENIED
    not_action = policy({"Effect": "Allow", "NotAction": "execute-api:Invoke", "Resource": "*"})
    assert decide(not_action, next_of("orders")) == IMPLICITLY_DENIED
    assert decide(not_action, next_of("orders"), action="execute-api:InvalidateCache") == ALLOWED
    deny_all_but = policy(
        allow("*"), {"Effect": "Deny", "Action": INVOKE, "NotResource": [next_of("a"), next_of("b")]}
    )
    assert [decide(deny_all_but, next_of(n)) for n in ("a", "b", "c")] == [
        ALLOWED,
        ALLOWED,
        EXPLICITLY_DENIED,
    ]


def test_the_fixed_parts_of_an_arn_are_compared_part_by_part():
    assert resource_matches("arn:aws:execute-api:eu-west-1:123456789012:*", next_of("x"))
    assert not resource_matches("arn:aws:execute-api:eu-west-2:123456789012:*", next_of("x"))
    assert not resource_matches("arn:aws:execute-api:eu-west-1:210987654321:*", next_of("x"))
    assert not resource_matches("arn:aws-cn:execute-api:*:*:*", next_of("x"))
    assert not resource_matches("arn:aws:lambda:*:*:*", next_of("x"))
    # a ? is one character of its own part, never a colon
    assert not resource_matches("arn:aws:execute-api:eu-west-?123456789012:*", next_of("x"))


def test_a_short_arn_ending_in_a_star_runs_on_over_the_colons():
    assert resource_matches("arn:aws:execute-api:eu-*", next_of("x"))
    assert resource_matches("arn:aws:execute-api:*", next_of("x"))
    assert not resource_matches("arn:aws:execute-api:us-*", next_of("x"))


# -- what the dev server will not evaluate, refused when it starts ------------------


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (
            policy(allow("*", Condition={"Bool": {"aws:SecureTransport": "true"}})),
            "has a Condition, which the dev server does not evaluate",
        ),
        (
            policy(allow(API.prefix + "POST/counters/${aws:username}/next")),
            "holds a policy variable",
        ),
        (policy(allow("*", Principal={"AWS": "*"})), "names a Principal"),
        (policy(allow("*", Resources="*")), "Resources is not an element of a statement"),
        (policy(allow("arn:aws:execute-*:*:*:*")), "wildcard in its service"),
        (policy(allow("counters/orders/next")), "neither * nor an ARN"),
        (policy(allow("arn:aws:execute-api:eu-west-1")), "not a whole ARN"),
        (
            policy({"Effect": "Allow", "Action": INVOKE, "NotResource": "arn:aws:execute-api:eu-*"}),
            "write them all (arn:aws:execute-api:eu-*:*:*)",
        ),
        (policy(allow("*", action="execute-*:Invoke")), "is not an action"),
        (policy(allow("*", action="Invoke")), "is not an action"),
        (policy({"Effect": "allow", "Action": INVOKE, "Resource": "*"}), "Effect must be Allow or Deny"),
        (policy({"Effect": "Allow", "Resource": "*"}), "exactly one of Action and NotAction"),
        (
            policy({"Effect": "Allow", "Action": INVOKE, "Resource": "*", "NotResource": "*"}),
            "exactly one of Resource and NotResource",
        ),
        (policy(allow([])), "Resource is a string or a list of strings"),
        ({"Version": "2012-10-17"}, "has no Statement"),
        ({"Version": "2024-01-01", "Statement": [allow("*")]}, "not an IAM policy version"),
        ([allow("*")], "a policy is a JSON object"),
    ],
)
def test_a_policy_read_otherwise_than_iam_reads_it_is_refused_saying_why(document, said):
    with pytest.raises(PolicyError) as refused:
        parse(document, "orders.json")
    assert said in str(refused.value)
    assert "orders.json" in str(refused.value)


def test_the_statement_at_fault_is_named_by_its_sid_or_its_place():
    tls = {"Bool": {"aws:SecureTransport": "true"}}
    with pytest.raises(PolicyError, match=r"orders.json, statement 2 has a Condition"):
        parse(policy(allow("*"), allow("*", Condition=tls)), "orders.json")
    with pytest.raises(PolicyError, match=r"statement 'Tls' has a Condition"):
        parse(policy(allow("*", Sid="Tls", Condition=tls)), "orders.json")


# -- the stack's policies, read from template.yaml ----------------------------------


def template(**parameters: str) -> Template:
    return Template(parameter_overrides={"ClientAuth": "AWS_IAM", **parameters})


def client_decides(resource_of, **parameters: str):
    stack = template(**parameters)
    arn = api_arn(stack, API.region, API.account, API.api_id)
    client = stack_policy(stack, "ClientPolicy", arn)
    return lambda method, path: client.decide(INVOKE, resource_of(arn, method, path)).result


def on(arn: ApiArn, method: str, path: str) -> str:
    return arn.of(method, path)


@pytest.mark.parametrize(
    ("client_counters", "allowed", "refused"),
    [
        ("*", ["orders", "orders.eu", "x"], []),
        ("orders", ["orders"], ["orders.eu", "ordersXeu", "orders2", "Orders"]),
        ("orders.eu", ["orders.eu"], ["ordersXeu", "orders", "orders.eu2"]),
        ("orders*", ["orders", "orders.eu", "ordersXeu"], ["order", "invoices"]),
        ("team-a_1.x-*", ["team-a_1.x-", "team-a_1.x-orders"], ["team-a_1Xx-orders", "team-a_1.x"]),
    ],
)
def test_the_client_policy_takes_next_and_batch_of_its_counters_only(client_counters, allowed, refused):
    decides = client_decides(on, ClientCounters=client_counters)
    for name in allowed:
        for method, route in (("POST", "next"), ("GET", "next"), ("POST", "batch")):
            assert decides(method, f"/counters/{name}/{route}") == ALLOWED, (name, method, route)
    for name in refused:
        for method, route in (("POST", "next"), ("POST", "batch")):
            assert decides(method, f"/counters/{name}/{route}") == IMPLICITLY_DENIED, (name, route)
    for method, path in (
        ("POST", "/admin/counters"),
        ("GET", "/admin/counters"),
        ("GET", "/admin/counters/orders"),
        ("PUT", "/admin/counters/orders"),
        ("DELETE", "/admin/counters/orders"),
        ("GET", "/counters/orders/batch"),
        ("PUT", "/counters/orders/next"),
    ):
        assert decides(method, path) == IMPLICITLY_DENIED, (method, path)


def test_the_client_policy_takes_no_get_next_when_the_stack_answers_none():
    decides = client_decides(on, AllowGetNext="false")
    assert decides("POST", "/counters/orders/next") == ALLOWED
    assert decides("GET", "/counters/orders/next") == IMPLICITLY_DENIED


def test_the_client_policy_names_this_api_and_its_stage_only():
    def api(api_id: str, stage: str):
        return lambda arn, method, path: ApiArn(arn.region, arn.account, api_id, stage).of(method, path)

    assert client_decides(api(API.api_id, "v1"))("POST", "/counters/orders/next") == ALLOWED
    assert client_decides(api("otherapi00", "v1"))("POST", "/counters/orders/next") == IMPLICITLY_DENIED
    assert client_decides(api(API.api_id, "prod"))("POST", "/counters/orders/next") == IMPLICITLY_DENIED
    on_prod = client_decides(api(API.api_id, "prod"), StageName="prod")
    assert on_prod("POST", "/counters/orders/next") == ALLOWED


@pytest.mark.parametrize(
    ("region", "partition"), [("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov"), ("eu-west-1", "aws")]
)
def test_requests_are_named_in_the_partition_of_the_region_as_the_policies_are(region, partition):
    stack = template()
    arn = api_arn(stack, region, API.account, API.api_id)
    assert arn.of("POST", "/counters/orders/next").startswith(f"arn:{partition}:execute-api:{region}:")
    for role in ("ClientPolicy", "AdminPolicy"):
        allowed = stack_policy(stack, role, arn)
        path = "/counters/orders/next" if role == "ClientPolicy" else "/admin/counters"
        assert allowed.decide(INVOKE, arn.of("POST", path)).result == ALLOWED, role


def test_the_admin_policy_takes_every_admin_route_and_nothing_else():
    stack = template()
    arn = api_arn(stack, API.region, API.account, API.api_id)
    admin = stack_policy(stack, "AdminPolicy", arn)
    for method, path in (
        ("POST", "/admin/counters"),
        ("GET", "/admin/counters"),
        ("GET", "/admin/counters/orders.eu"),
        ("PUT", "/admin/counters/orders"),
        ("DELETE", "/admin/counters/orders"),
    ):
        assert admin.decide(INVOKE, arn.of(method, path)).result == ALLOWED, (method, path)
    for method, path in (("POST", "/counters/orders/next"), ("POST", "/counters/orders/batch")):
        assert admin.decide(INVOKE, arn.of(method, path)).result == IMPLICITLY_DENIED


@pytest.mark.parametrize("client_auth", ["API_KEY", "NONE"])
def test_a_client_identity_is_refused_where_the_stack_makes_no_client_policy(client_auth):
    stack = template(ClientAuth=client_auth)
    with pytest.raises(PolicyError, match="only when its condition ClientAuthIsIam holds"):
        stack_policy(stack, "ClientPolicy", api_arn(stack, API.region, API.account))


@pytest.mark.parametrize(
    ("text", "role", "access_key", "secret"),
    [
        ("client=AKIACLIENT:s3cret", "client", "AKIACLIENT", "s3cret"),
        ("admin=AKIA1:a:b=c/d+e", "admin", "AKIA1", "a:b=c/d+e"),
        ("policies/a=b.json=AKIA2:x", "policies/a=b.json", "AKIA2", "x"),
    ],
)
def test_an_identity_is_role_equals_key_colon_secret(text, role, access_key, secret):
    assert IdentitySpec.parse(text) == IdentitySpec(role, access_key, secret)


@pytest.mark.parametrize("text", ["client", "client=AKIA1", "=AKIA1:x", "client=AKIA 1:x", "client=:x"])
def test_an_identity_that_is_not_role_equals_key_colon_secret_is_refused(text):
    with pytest.raises(ValueError, match="ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY"):
        IdentitySpec.parse(text)


# -- conditions on who calls and through which endpoint -------------------------------

MEMBER = {"aws:PrincipalAccount": "210987654321", "aws:PrincipalOrgID": "o-abcdefghij"}


def decide_in(document: dict, context: dict, resource: str | None = None) -> str:
    return parse(document, "test policy").decide(INVOKE, resource or next_of("orders"), context).result


@pytest.mark.parametrize(
    ("condition", "context", "holds"),
    [
        ({"StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij"}}, MEMBER, True),
        ({"StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij"}}, {"aws:PrincipalAccount": "1"}, False),
        ({"StringEquals": {"aws:PrincipalOrgID": "O-ABCDEFGHIJ"}}, MEMBER, False),  # values keep their case
        ({"StringEquals": {"AWS:principalorgid": "o-abcdefghij"}}, MEMBER, True),  # keys do not
        ({"StringEquals": {"aws:PrincipalAccount": ["1", "210987654321"]}}, MEMBER, True),  # values: any
        ({"StringNotEquals": {"aws:PrincipalAccount": "123456789012"}}, MEMBER, True),
        ({"StringNotEquals": {"aws:PrincipalAccount": "210987654321"}}, MEMBER, False),
        ({"StringNotEquals": {"aws:SourceVpce": "vpce-11112222"}}, MEMBER, True),  # absent: a Not holds
        ({"StringEquals": {"aws:SourceVpce": "vpce-11112222"}}, MEMBER, False),  # absent: matches nothing
        ({"StringLike": {"aws:SourceVpce": "vpce-1111*"}}, {"aws:SourceVpce": "vpce-11112222"}, True),
        ({"StringLike": {"aws:SourceVpce": "vpce-1111?"}}, {"aws:SourceVpce": "vpce-11112222"}, False),
        ({"StringNotLike": {"aws:SourceVpce": "vpce-9*"}}, {"aws:SourceVpce": "vpce-11112222"}, True),
        (
            {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::210987654321:role/*"}},
            {"aws:PrincipalArn": "arn:aws:iam::210987654321:role/orders"},
            True,
        ),
        (
            {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/orders"}},
            {"aws:PrincipalArn": "arn:aws:iam::210987654321:user/orders"},
            False,
        ),
        (
            {"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::210987654321:role/*"}},
            {"aws:PrincipalArn": "arn:aws:iam::210987654321:role/orders"},
            False,
        ),
        # every operator, and every key within one, must hold
        (
            {
                "StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij"},
                "StringNotEquals": {"aws:PrincipalAccount": "210987654321"},
            },
            MEMBER,
            False,
        ),
        (
            {"StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij", "aws:PrincipalAccount": "210987654321"}},
            MEMBER,
            True,
        ),
    ],
)
def test_a_condition_holds_as_iam_evaluates_it(condition, context, holds):
    document = policy(allow(next_of("orders"), Condition=condition))
    assert decide_in(document, context) == (ALLOWED if holds else IMPLICITLY_DENIED)


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ({"Bool": {"aws:SecureTransport": "true"}}, "Bool"),
        ({"StringEqualsIfExists": {"aws:SourceVpce": "vpce-11112222"}}, "StringEqualsIfExists"),
        ({"ForAnyValue:StringEquals": {"aws:PrincipalOrgPaths": "o-a/"}}, "ForAnyValue:StringEquals"),
        ({"StringEquals": {"aws:SourceIp": "10.0.0.1"}}, "StringEquals on aws:SourceIp"),
        ({"ArnLike": {"aws:SourceVpce": "vpce-*"}}, "ArnLike on aws:SourceVpce"),
        ({"StringEquals": {"aws:PrincipalOrgID": "${aws:PrincipalOrgID}"}}, "holds a policy variable"),
        ({"StringEquals": {"aws:PrincipalOrgID": []}}, "a string or a list of strings"),
    ],
)
def test_a_condition_the_dev_server_cannot_evaluate_as_in_aws_is_refused_saying_why(condition, said):
    with pytest.raises(PolicyError) as refused:
        parse(policy(allow("*", Condition=condition)), "orders.json")
    assert said in str(refused.value)


def resource_statement(**more) -> dict:
    return {"Effect": "Allow", "Action": INVOKE, "Resource": next_of("orders"), **more}


@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}])
def test_a_resource_policy_names_every_principal_and_says_whom_by_its_conditions(principal):
    document = policy(resource_statement(Principal=principal, Condition={"StringEquals": MEMBER}))
    resource = parse(document, "the API's resource policy", resource=True)
    assert resource.decide(INVOKE, next_of("orders"), MEMBER).allowed
    assert not resource.decide(INVOKE, next_of("orders"), {"aws:PrincipalAccount": "1"}).allowed


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        (resource_statement(), "whose Principal is *"),
        (resource_statement(Principal={"AWS": "arn:aws:iam::210987654321:root"}), "whose Principal is *"),
        (resource_statement(Principal="*", NotPrincipal={"AWS": "*"}), "NotPrincipal"),
    ],
)
def test_a_resource_policy_principal_the_dev_server_does_not_evaluate_is_refused(statement, said):
    with pytest.raises(PolicyError, match=said):
        parse(policy(statement), "the API's resource policy", resource=True)


# -- the caller's policy and the API's, together as API Gateway takes them -----------

DECISIONS = {
    "allow": Decision(ALLOWED, None),
    "neither": Decision(IMPLICITLY_DENIED, None),
    "deny": Decision(EXPLICITLY_DENIED, None),
    "none": None,
}
# API Gateway developer guide, "How API Gateway resource policies affect
# authorization workflow": Table A (same account), Table B (another).
TABLES = [
    ("allow", "allow", ALLOWED, ALLOWED),
    ("allow", "neither", ALLOWED, IMPLICITLY_DENIED),
    ("allow", "deny", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
    ("neither", "allow", ALLOWED, IMPLICITLY_DENIED),
    ("neither", "neither", IMPLICITLY_DENIED, IMPLICITLY_DENIED),
    ("neither", "deny", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
    ("deny", "allow", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
    ("deny", "neither", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
    ("deny", "deny", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
    # no resource policy: the same account by its IAM policy, another account never
    ("allow", "none", ALLOWED, IMPLICITLY_DENIED),
    ("neither", "none", IMPLICITLY_DENIED, IMPLICITLY_DENIED),
    ("deny", "none", EXPLICITLY_DENIED, EXPLICITLY_DENIED),
]


@pytest.mark.parametrize(("mine", "theirs", "same_account", "other_account"), TABLES)
def test_iam_auth_takes_either_policy_in_the_same_account_and_both_from_another(
    mine, theirs, same_account, other_account
):
    assert gateway_decision(DECISIONS[mine], DECISIONS[theirs], same_account=True) == same_account
    assert gateway_decision(DECISIONS[mine], DECISIONS[theirs], same_account=False) == other_account


@pytest.mark.parametrize(
    ("theirs", "decided"),
    [("none", ALLOWED), ("allow", ALLOWED), ("neither", IMPLICITLY_DENIED), ("deny", EXPLICITLY_DENIED)],
)
def test_a_route_without_iam_auth_takes_what_the_resource_policy_allows_if_there_is_one(theirs, decided):
    assert gateway_decision(None, DECISIONS[theirs], same_account=False) == decided


# -- identities of other accounts, and the stack's resource policy --------------------


@pytest.mark.parametrize(
    ("text", "account", "organization", "secret"),
    [
        ("client=AKIA1:s3cret@210987654321", "210987654321", None, "s3cret"),
        ("client=AKIA1:s/3+c=r:et@210987654321/o-abcdefghij", "210987654321", "o-abcdefghij", "s/3+c=r:et"),
        ("client=AKIA1:s3cret", None, None, "s3cret"),
        # not an account: part of the secret
        ("client=AKIA1:s3cret@2109", None, None, "s3cret@2109"),
    ],
)
def test_an_identity_may_name_its_account_and_organization(text, account, organization, secret):
    spec = IdentitySpec.parse(text)
    assert (spec.account, spec.organization, spec.secret_key) == (account, organization, secret)


def identities(*texts: str, organization: str | None = "o-abcdefghij", **parameters: str):
    stack = template(**parameters)
    arn = api_arn(stack, API.region, API.account, API.api_id)
    return identities_of([IdentitySpec.parse(text) for text in texts], stack, arn, organization)


def test_an_identity_is_of_the_stacks_account_and_its_organization_unless_it_says_otherwise():
    found = identities(
        "client=AKIA1:x", "client=AKIA2:x@210987654321", "client=AKIA3:x@111122223333/o-zzzzzzzzzz"
    )
    assert {key: (who.account, who.organization) for key, who in found.items()} == {
        "AKIA1": (API.account, "o-abcdefghij"),
        "AKIA2": ("210987654321", "o-abcdefghij"),
        "AKIA3": ("111122223333", "o-zzzzzzzzzz"),
    }
    assert found["AKIA2"].context() == {
        "aws:PrincipalAccount": "210987654321",
        "aws:PrincipalArn": "arn:aws:iam::210987654321:user/AKIA2",
        "aws:PrincipalOrgID": "o-abcdefghij",
    }


def test_an_account_is_in_one_organization():
    with pytest.raises(PolicyError, match="an account is in one Organization"):
        identities("client=AKIA1:x@210987654321/o-zzzzzzzzzz", "client=AKIA2:x@210987654321/o-yyyyyyyyyy")
    with pytest.raises(PolicyError, match="an account is in one Organization"):
        identities(f"client=AKIA1:x@{API.account}/o-zzzzzzzzzz")


def test_the_api_has_no_resource_policy_unless_the_parameters_make_one():
    stack = template()
    assert resource_policy(stack, api_arn(stack, API.region, API.account, API.api_id)) is None


def test_the_resource_policy_is_read_with_this_apis_arns_written_out():
    stack = template(
        EndpointType="PRIVATE", VpcEndpointIds="vpce-11112222", CallerOrganizationId="o-abcdefghij"
    )
    arn = api_arn(stack, API.region, API.account, API.api_id)
    read = resource_policy(stack, arn)
    assert read is not None
    labels = [statement.label for statement in read.statements]
    assert labels == [
        "statement 'OrganizationTakesIds'",
        "statement 'AdminOnlyFromThisAccount'",
        "statement 'OnlyThroughTheListedEndpoints'",
    ]
    assert read.statements[0].resources[0] == f"{API.prefix}POST/counters/*/next"
    assert read.statements[2].resources == (f"arn:aws:execute-api:{API.region}:{API.account}:{API.api_id}/*",)
    member = MEMBER | {"aws:SourceVpce": "vpce-11112222"}
    assert read.decide(INVOKE, next_of("orders"), member).allowed
    assert read.decide(INVOKE, next_of("orders"), MEMBER).result == EXPLICITLY_DENIED


@pytest.mark.parametrize(
    ("parameters", "rule"),
    [
        ({"EndpointType": "PRIVATE"}, "PrivateApiNeedsEndpoints"),
        ({"ClientAuth": "NONE", "CallerOrganizationId": "o-abcdefghij"}, "OtherAccountsSign"),
        ({"VpcEndpointIds": "vpce-11112222"}, "EndpointsOnlyForAPrivateApi"),
    ],
)
def test_parameters_a_template_rule_refuses_are_named_with_the_rule_and_its_reason(parameters, rule):
    """The dev server refuses at start what CloudFormation would refuse."""
    ((named, reason),) = Template(parameter_overrides=parameters).refusals()
    assert named == rule
    assert reason


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--source-vpce", "vpce-11112222"], "--source-vpce applies to a private API"),
        (["--source-vpce", "vpce-xyz"], "a VPC endpoint's id is vpce- and 8 to 17 hex digits"),
        (["--organization", "org-1"], "an AWS Organization's id is o- and"),
        (["--parameter", "EndpointType=PRIVATE"], "template.yaml's rule PrivateApiNeedsEndpoints refuses"),
    ],
)
def test_the_dev_server_stops_at_start_where_api_gateway_or_cloudformation_would_refuse(argv, said, capsys):
    """Given options that cannot hold together, when the dev server starts,
    then it stops (exit 2) with the reason, before serving anything."""
    from devserver.__main__ import parse_args, read_template

    with pytest.raises(SystemExit) as stopped:
        read_template(parse_args(["--parameter", "ClientAuth=AWS_IAM", *argv]))
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err
