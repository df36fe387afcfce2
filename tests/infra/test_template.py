"""Routing, auth and IAM scoping, read from template.yaml and from what the
SAM transform turns it into."""

from __future__ import annotations

import pytest

from idblocks_core.domain.errors import ERROR_CODES
from tests.support.api import routes
from tests.support.gateway import body_of, gateway_responses
from tests.support.sam import method_security, translate

EXPECTED_ROUTES = {
    ("POST", "/counters/{name}/next"): "NextFunction",
    ("GET", "/counters/{name}/next"): "NextFunction",
    ("POST", "/counters/{name}/batch"): "BatchFunction",
    ("POST", "/admin/counters"): "AdminFunction",
    ("GET", "/admin/counters"): "AdminFunction",
    ("GET", "/admin/counters/{name}"): "AdminFunction",
    ("PUT", "/admin/counters/{name}"): "AdminFunction",
    ("DELETE", "/admin/counters/{name}"): "AdminFunction",
}
CLIENT_ROUTES = {route for route, fn in EXPECTED_ROUTES.items() if fn != "AdminFunction"}
ADMIN_ROUTES = set(EXPECTED_ROUTES) - CLIENT_ROUTES


def test_every_route_goes_to_its_function(template):
    assert routes(template) == EXPECTED_ROUTES


def test_every_api_event_uses_the_explicit_api(template):
    for fn in template.of_type("AWS::Serverless::Function").values():
        for event in fn["Properties"]["Events"].values():
            assert event["Properties"]["RestApiId"] == {"Ref": "Api"}


@pytest.mark.parametrize("client_auth", ["AWS_IAM", "API_KEY", "NONE"])
def test_admin_routes_always_require_iam(client_auth):
    security = method_security(translate(ClientAuth=client_auth))
    for route in ADMIN_ROUTES:
        assert security[route] == [{"AWS_IAM": []}], route


@pytest.mark.parametrize(
    ("client_auth", "expected"),
    [("AWS_IAM", [{"AWS_IAM": []}]), ("API_KEY", [{"api_key": []}]), ("NONE", [{"NONE": []}])],
)
def test_client_routes_follow_client_auth(client_auth, expected):
    security = method_security(translate(ClientAuth=client_auth))
    assert {route: security[route] for route in CLIENT_ROUTES} == dict.fromkeys(CLIENT_ROUTES, expected)


def test_the_translated_api_has_exactly_the_expected_routes():
    assert set(method_security(translate())) == set(EXPECTED_ROUTES)


def test_default_client_auth_is_iam(template):
    assert template.raw["Parameters"]["ClientAuth"]["Default"] == "AWS_IAM"


def test_stage_has_tracing_and_parameterised_throttling():
    cfn = translate(ThrottlingRateLimit="123", ThrottlingBurstLimit="456")
    (stage,) = [r for r in cfn["Resources"].values() if r["Type"] == "AWS::ApiGateway::Stage"]
    assert stage["Properties"]["TracingEnabled"] is True
    (setting,) = stage["Properties"]["MethodSettings"]
    # the parameters' values, as given at deploy time
    assert (str(setting["ThrottlingRateLimit"]), str(setting["ThrottlingBurstLimit"])) == ("123", "456")
    assert (setting["ResourcePath"], setting["HttpMethod"]) == ("/*", "*")


# -- IAM: least privilege, per function --------------------------------------

ALLOWED = {
    "NextFunction": {
        "CountersTable": {"dynamodb:UpdateItem"},
        "IdempotencyTable": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        },
    },
    "AdminFunction": {"CountersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Scan"}},
}
ALLOWED["BatchFunction"] = ALLOWED["NextFunction"]


def _statements(cfn, function):
    role = cfn["Resources"][f"{function}Role"]["Properties"]
    managed = role.get("ManagedPolicyArns", [])
    inline = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
    return managed, inline


@pytest.mark.parametrize("function", sorted(ALLOWED))
def test_each_function_may_touch_only_its_tables_and_actions(function):
    managed, statements = _statements(translate(), function)
    granted: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        assert "*" not in str(actions), statement
        assert "*" not in str(resources), statement
        for resource in resources:
            assert set(resource) == {"Fn::GetAtt"}, resource
            assert resource["Fn::GetAtt"][1] == "Arn", resource
            granted.setdefault(resource["Fn::GetAtt"][0], set()).update(actions)
    assert granted == ALLOWED[function]
    # beyond its own statements, only the logging and tracing basics
    assert sorted(managed) == [
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    ]


# -- functions, layer, tables -----------------------------------------------


def test_functions_run_python313_arm64_with_the_layer_and_tracing(template):
    globals_ = template.raw["Globals"]["Function"]
    assert globals_["Runtime"] == "python3.13"
    assert globals_["Architectures"] == ["arm64"]
    assert template.parameters["Tracing"] == "Active"
    env = globals_["Environment"]["Variables"]
    assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} <= set(env)
    for fn in template.of_type("AWS::Serverless::Function").values():
        props = fn["Properties"]
        assert not {"Runtime", "Architectures"} & set(props), "set once, in Globals"
        # Per function, where the parameters' values reach the version's name
        # (tests/infra/test_versions_template.py).
        assert props["Tracing"] == {"Ref": "Tracing"}
        # the OpenTelemetry layer only when asked for (tests/infra/test_tracing_template.py)
        assert props["Layers"] == [
            {"Fn::If": ["OpenTelemetryOn", {"Ref": "OpenTelemetryLayerArn"}, {"Ref": "AWS::NoValue"}]},
            {"Ref": "CoreLayer"},
        ]
        assert props["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}


def test_the_layer_is_built_by_sam_for_python313(template):
    (layer,) = template.of_type("AWS::Serverless::LayerVersion").values()
    assert layer["Metadata"]["BuildMethod"] == "python3.13"
    assert layer["Properties"]["ContentUri"] == "layers/core/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]


def test_functions_are_thin(template):
    for spec in template.functions.values():
        files = sorted(p.name for p in spec.code_dir.iterdir() if p.name != "__pycache__")
        assert files == ["app.py"], f"{spec.code_dir}: dependencies belong in the layer"
        source = (spec.code_dir / "app.py").read_text()
        assert "boto3" not in source
        assert "botocore" not in source
        assert len(source.splitlines()) < 90


def test_counters_table_is_durable(template):
    props = template.resources["CountersTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["DeletionProtectionEnabled"] == {"Ref": "TableDeletionProtection"}
    assert template.resources["CountersTable"]["DeletionPolicy"] == "Retain"


def test_idempotency_table_expires_records(template):
    props = template.resources["IdempotencyTable"]["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]


def test_parameters_reach_the_functions(template):
    for fn in template.of_type("AWS::Serverless::Function").values():
        env = fn["Properties"]["Environment"]["Variables"]
        assert env["AUTO_CREATE_COUNTERS"] == {"Ref": "AutoCreateCounters"}
        assert env["MAX_BATCH_SIZE"] == {"Ref": "MaxBatchSize"}
        assert env["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    params = template.raw["Parameters"]
    assert (
        params["AutoCreateCounters"]["Default"] == "false"
    )  # an operator creates counters (docs/security.md)
    assert params["MaxBatchSize"]["Default"] == 1000000
    assert set(params["ClientAuth"]["AllowedValues"]) == {"AWS_IAM", "API_KEY", "NONE"}


def test_outputs_name_the_api_and_tables(template):
    assert {"ApiUrl", "CountersTableName", "IdempotencyTableName"} <= set(template.raw["Outputs"])


def test_samconfig_environments_name_real_parameters(template):
    import tomllib

    config = tomllib.loads((template.path.parent / "samconfig.toml").read_text())
    assert {"default", "prod"} <= set(config)
    for env in ("default", "prod"):
        deploy = config[env]["deploy"]["parameters"]
        # LanguageExtensions is a transform macro: deploys need AUTO_EXPAND
        assert "CAPABILITY_AUTO_EXPAND" in deploy["capabilities"]
        overrides = dict(pair.split("=", 1) for pair in deploy["parameter_overrides"].split())
        assert set(overrides) <= set(template.parameters), env
        for name, value in overrides.items():
            allowed = template.raw["Parameters"][name].get("AllowedValues")
            assert allowed is None or value in allowed, (env, name, value)
    assert config["prod"]["deploy"]["parameters"]["parameter_overrides"].count("TableDeletionProtection=true")


# -- API Gateway's own answers ------------------------------------------------

GATEWAY_RESPONSE_TYPES = {
    "MISSING_AUTHENTICATION_TOKEN",  # unknown route or method, or an unsigned AWS_IAM request
    "INVALID_SIGNATURE",
    "EXPIRED_TOKEN",
    "ACCESS_DENIED",
    "INVALID_API_KEY",
    "THROTTLED",
    "QUOTA_EXCEEDED",  # a client key's UsageQuotaPerDay spent (tests/infra/test_gateway_responses.py)
    "REQUEST_TOO_LARGE",
    "INTEGRATION_TIMEOUT",
    "DEFAULT_4XX",
    "DEFAULT_5XX",
}


# A spent quota asks for a pause longer than the clients' retry deadline.
EXTRA_HEADERS = {"QUOTA_EXCEEDED": {"gatewayresponse.header.Retry-After": "'600'"}}


@pytest.mark.parametrize("client_auth", ["AWS_IAM", "API_KEY", "NONE"])
def test_the_gateways_own_errors_have_the_apis_shape_and_are_never_cached(client_auth):
    """Without GatewayResponses, API Gateway answered an unknown route with
    403 {"message": "Missing Authentication Token"} (and throttling, bad auth,
    timeouts likewise): no error code, no Cache-Control. The deployed API (the
    template as the SAM transform turns it into CloudFormation) now gives each
    the API's error body, Cache-Control: no-store and, as every answer of the
    functions, X-Content-Type-Options: nosniff."""
    responses = gateway_responses(translate(ClientAuth=client_auth))
    assert set(responses) == GATEWAY_RESPONSE_TYPES
    for kind, response in responses.items():
        assert response["responseParameters"] == {
            "gatewayresponse.header.Cache-Control": "'no-store'",
            "gatewayresponse.header.X-Content-Type-Options": "'nosniff'",
        } | EXTRA_HEADERS.get(kind, {}), kind
        filled = body_of(response, "Forbidden")
        assert set(filled) == {"error"}, kind
        assert set(filled["error"]) == {"code", "message"}, kind
        assert filled["error"]["code"] in ERROR_CODES, kind
        assert filled["error"]["message"], kind


def test_an_unknown_route_keeps_api_gateways_403():
    """API Gateway answers an unknown route and an unsigned request to an
    AWS_IAM route with one response type; a 404 would tell the caller who
    forgot to sign that the counter does not exist (the client maps 404 to
    CounterNotFound)."""
    response = gateway_responses(translate())["MISSING_AUTHENTICATION_TOKEN"]
    assert response.get("statusCode") in (None, "403")
    assert ERROR_CODES["unknown_route_or_unsigned"].status == 403


@pytest.mark.parametrize(
    ("overrides", "count", "index"), [({}, "1", "0"), ({"RegionCount": "3", "RegionIndex": "2"}, "3", "2")]
)
def test_region_count_and_index_reach_every_function(overrides, count, index):
    """K = 1 by default (a single region, as before); K = 3 with index 2
    reaches all three functions and builds a core that hands out residue 2."""
    from idblocks_core.core import build_core
    from localrun.tables import TABLE_NAMES
    from localrun.template import Template

    template = Template(parameter_overrides=overrides)
    params = template.raw["Parameters"]
    assert (params["RegionCount"]["Default"], params["RegionIndex"]["Default"]) == (1, 0)
    for function in ("NextFunction", "BatchFunction", "AdminFunction"):
        env = template.environment(function, TABLE_NAMES)
        assert (env["REGION_COUNT"], env["REGION_INDEX"]) == (count, index)
    store = build_core(template.environment("BatchFunction", TABLE_NAMES)).store
    assert (store.step, store.residue) == (int(count), int(index))
