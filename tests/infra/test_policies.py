"""Who may call what, as AWS decides it from the deployed template (the SAM
transform's output, tests/support/sam.py), for every ClientAuth: how API
Gateway invokes the functions, each function's resource policy, and the
policies the stack outputs for clients and admins, evaluated by an IAM
policy evaluator (tests/support/iam.py) on every route's ARN.

A stack here is deployed as idblocks in us-east-1 of account 123456789012,
its REST API's id a1b2c3d4e5."""

from __future__ import annotations

import re
from typing import Any

import pytest

from localrun.template import Template
from tests.infra.test_template import ADMIN_ROUTES, CLIENT_ROUTES, EXPECTED_ROUTES
from tests.support.gateway import gateway_responses
from tests.support.iam import ALLOWED, Request, decide
from tests.support.sam import translate

CLIENT_AUTHS = ["AWS_IAM", "API_KEY", "NONE"]
ACCOUNT, REGION, API_ID, STACK = "123456789012", "us-east-1", "a1b2c3d4e5", "idblocks"
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": STACK}
ALIASES = {
    f"{function}Aliaslive": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK}-{route}:live"
    for function, route in (("NextFunction", "next"), ("BatchFunction", "batch"), ("AdminFunction", "admin"))
}
CLIENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/orders-service"


def resolved(value: Any, names: dict[str, str]) -> Any:
    """A translated template's value as CloudFormation resolves it once the
    stack exists: Fn::Sub and Ref of pseudo parameters and of resources
    (``names``); any other intrinsic fails the test, not silently passes."""
    if isinstance(value, list):
        return [resolved(item, names) for item in value]
    if isinstance(value, str):
        return re.sub(r"\$\{([^}]+)\}", lambda found: names[found[1]], value)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return names[value["Ref"]]
    if isinstance(value, dict) and set(value) == {"Fn::Sub"}:
        text, local = value["Fn::Sub"] if isinstance(value["Fn::Sub"], list) else (value["Fn::Sub"], {})
        return resolved(text, names | {key: resolved(v, names) for key, v in local.items()})
    if isinstance(value, dict):
        assert not any(key.startswith("Fn::") for key in value), value
        return {key: resolved(item, names) for key, item in value.items()}
    return value


def stack(**parameters: str) -> dict[str, Any]:
    cfn = translate(**parameters)
    names = PSEUDO | ALIASES | {"Api": API_ID}
    return {"cfn": cfn, "names": names}


def route_arn(method: str, path: str, counter: str = "orders", stage: str = "v1", api: str = API_ID) -> str:
    return f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{api}/{stage}/{method}{path.replace('{name}', counter)}"


def managed_policy(deployed: dict[str, Any], logical_id: str) -> dict[str, Any]:
    resource = deployed["cfn"]["Resources"][logical_id]
    assert resource["Type"] == "AWS::IAM::ManagedPolicy"
    return resolved(resource["Properties"]["PolicyDocument"], deployed["names"])


def invoke(policy: dict[str, Any], *arns: str, action: str = "execute-api:Invoke") -> list[str]:
    return decide(Request(CLIENT_ROLE, action, arn, ACCOUNT, identity_policies=(policy,)) for arn in arns)


# -- how API Gateway invokes the functions --------------------------------------------


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_no_integration_calls_a_function_with_the_callers_credentials(client_auth):
    """SAM's default for AWS_IAM routes (InvokeRole CALLER_CREDENTIALS) gave
    every integration credentials arn:aws:iam::*:user/*: API Gateway invoked
    the function as the caller, so a client holding only execute-api:Invoke
    got an integration failure, and every working client held
    lambda:InvokeFunction. Now API Gateway invokes as itself."""
    body = translate(ClientAuth=client_auth)["Resources"]["Api"]["Properties"]["Body"]
    integrations = {
        (method.upper(), path): operation["x-amazon-apigateway-integration"]
        for path, operations in body["paths"].items()
        for method, operation in operations.items()
    }
    assert set(integrations) == set(EXPECTED_ROUTES)
    for route, integration in integrations.items():
        assert "credentials" not in integration, route
        assert integration["type"] == "aws_proxy", route


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_each_function_admits_api_gateway_for_this_apis_routes_only(client_auth):
    """Each function's resource policy (the Lambda permissions) lets API
    Gateway invoke its live alias for this API's requests to the function's
    own routes, and for nothing else: another API, another function's route."""
    deployed = stack(ClientAuth=client_auth)
    permissions = [
        resolved(r["Properties"], deployed["names"])
        for r in deployed["cfn"]["Resources"].values()
        if r["Type"] == "AWS::Lambda::Permission"
    ]
    requests, expected = [], []
    for alias_id, alias in ALIASES.items():
        function = alias_id.removesuffix("Aliaslive")
        statements = [
            {
                "Effect": "Allow",
                "Principal": {"Service": p["Principal"]},
                "Action": p["Action"],
                "Resource": p["FunctionName"],
                "Condition": {"ArnLike": {"AWS:SourceArn": p["SourceArn"]}},
            }
            for p in permissions
            if p["FunctionName"] == alias
        ]
        policy = {"Version": "2012-10-17", "Statement": statements}
        for (method, path), owner in EXPECTED_ROUTES.items():
            for source, allowed in (
                (route_arn(method, path), owner == function),
                (route_arn(method, path, api="otherapi99"), False),
            ):
                requests.append(
                    Request(
                        "apigateway.amazonaws.com",
                        "lambda:InvokeFunction",
                        alias,
                        ACCOUNT,
                        resource_policy=policy,
                        context={"aws:SourceArn": source, "aws:SourceAccount": ACCOUNT},
                    )
                )
                expected.append(allowed)
    decisions = decide(requests)
    assert [d == ALLOWED for d in decisions] == expected, decisions


# -- the policies the stack outputs ---------------------------------------------------


def _every_route(counters: tuple[str, ...]) -> list[tuple[tuple[str, str], str, str]]:
    return [
        ((method, path), counter, route_arn(method, path, counter))
        for method, path in sorted(EXPECTED_ROUTES)
        for counter in counters
    ]


@pytest.mark.parametrize(
    ("client_counters", "allowed", "refused"),
    [
        ("*", ("orders", "invoices", "a.b-c_9"), ()),
        ("orders", ("orders",), ("orders2", "order", "Orders", "xorders")),
        ("orders.eu", ("orders.eu",), ("ordersXeu", "orders.eu2", "orders-eu")),
        (
            "team-a-*",
            ("team-a-", "team-a-orders", "team-a-x.y"),
            ("team-b-orders", "team-a", "TEAM-A-orders"),
        ),
    ],
)
def test_a_client_policy_allows_exactly_next_and_batch_of_its_counters(client_counters, allowed, refused):
    """With only the ClientPolicyArn policy, a client may call next (POST,
    GET) and batch on the counters ClientCounters names, and no admin route,
    no other counter, no other stage or API."""
    deployed = stack(ClientCounters=client_counters)
    policy = managed_policy(deployed, "ClientPolicy")
    cases = _every_route(allowed + refused)
    expected = [route in CLIENT_ROUTES and counter in allowed for route, counter, _ in cases]
    extra = [
        route_arn("POST", "/counters/{name}/next", "orders", stage="test"),
        route_arn("POST", "/counters/{name}/batch", "orders", api="otherapi99"),
    ]
    decisions = invoke(policy, *(arn for _, _, arn in cases), *extra)
    assert [d == ALLOWED for d in decisions] == [*expected, False, False], list(
        zip(cases, decisions, strict=False)
    )


def test_a_client_policy_leaves_out_get_next_when_it_is_switched_off():
    policy = managed_policy(stack(AllowGetNext="false"), "ClientPolicy")
    decisions = invoke(policy, *(route_arn(m, p) for m, p in sorted(CLIENT_ROUTES)))
    assert dict(zip(sorted(CLIENT_ROUTES), decisions, strict=True)) == {
        ("GET", "/counters/{name}/next"): "ImplicitlyDenied",
        ("POST", "/counters/{name}/batch"): ALLOWED,
        ("POST", "/counters/{name}/next"): ALLOWED,
    }


def test_a_client_may_not_invoke_a_function_directly():
    """A client with the client policy holds no lambda:InvokeFunction: it
    cannot send a function an event it wrote (a forged caller), which it
    had to be able to do while API Gateway invoked with its credentials."""
    policy = managed_policy(stack(), "ClientPolicy")
    decisions = invoke(policy, *ALIASES.values(), *(a.removesuffix(":live") for a in ALIASES.values()),
                       action="lambda:InvokeFunction")  # fmt: skip
    assert set(decisions) == {"ImplicitlyDenied"}, decisions


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_the_admin_policy_allows_the_admin_routes_and_nothing_else(client_auth):
    policy = managed_policy(stack(ClientAuth=client_auth), "AdminPolicy")
    cases = _every_route(("orders",))
    decisions = invoke(
        policy, *(arn for _, _, arn in cases), route_arn("GET", "/admin/counters", stage="test")
    )
    assert [d == ALLOWED for d in decisions] == [*(route in ADMIN_ROUTES for route, _, _ in cases), False]


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_the_stack_outputs_the_policies_its_callers_need(client_auth):
    template = Template(parameter_overrides={"ClientAuth": client_auth})
    outputs = translate(ClientAuth=client_auth)["Outputs"]
    assert "Condition" not in outputs["AdminPolicyArn"]
    assert outputs["AdminPolicyArn"]["Value"] == {"Ref": "AdminPolicy"}
    # A client policy only where callers sign (AWS_IAM); a usage plan only with API keys.
    for output, resource, when in (
        ("ClientPolicyArn", "ClientPolicy", "AWS_IAM"),
        ("UsagePlanId", "ClientUsagePlan", "API_KEY"),
    ):
        deployed = template.condition(outputs[output]["Condition"])
        assert (
            deployed == template.condition(template.resources[resource]["Condition"]) == (client_auth == when)
        )
        if deployed:
            assert outputs[output]["Value"] == {"Ref": resource}


# -- callers with API keys --------------------------------------------------------------


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_no_api_key_is_shared_by_every_client(client_auth):
    """With API_KEY, SAM's usage plan made one key for every client: they
    shared one caller, so one's Idempotency-Key answered another's request,
    and no record said which client it was. Now the stack makes no key; each
    client's own key is added to the plan (docs/deploy.md)."""
    template = Template(parameter_overrides={"ClientAuth": client_auth})
    cfn = translate(ClientAuth=client_auth)
    types = {logical_id: r["Type"] for logical_id, r in cfn["Resources"].items()}
    assert "AWS::ApiGateway::ApiKey" not in types.values()
    assert "AWS::ApiGateway::UsagePlanKey" not in types.values()
    plans = [logical_id for logical_id, kind in types.items() if kind == "AWS::ApiGateway::UsagePlan"]
    assert plans == ["ClientUsagePlan"]
    plan = cfn["Resources"]["ClientUsagePlan"]
    assert template.condition(plan["Condition"]) == (client_auth == "API_KEY")
    if client_auth == "API_KEY":
        (stage,) = [logical_id for logical_id, kind in types.items() if kind == "AWS::ApiGateway::Stage"]
        assert plan["Properties"]["ApiStages"] == [{"ApiId": {"Ref": "Api"}, "Stage": {"Ref": stage}}]


@pytest.mark.parametrize("client_auth", CLIENT_AUTHS)
def test_no_browser_page_of_another_site_may_call_the_api(client_auth):
    """No CORS: no OPTIONS route, no Access-Control-* header in API
    Gateway's own answers, so a browser refuses another origin's script the
    answers (the functions' answers carry none either:
    tests/unit/test_forged_events.py reads their headers)."""
    template = Template(parameter_overrides={"ClientAuth": client_auth})
    assert "Cors" not in template.resources["Api"]["Properties"]
    cfn = translate(ClientAuth=client_auth)
    body = cfn["Resources"]["Api"]["Properties"]["Body"]
    assert all("options" not in operations for operations in body["paths"].values())
    for response in gateway_responses(cfn).values():
        assert not any("access-control" in name.lower() for name in response["responseParameters"])
