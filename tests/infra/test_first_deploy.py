"""The first deploy on a new account, a retry after a failed one, and what a
deployed stack then is, read from the template as CloudFormation deploys it
(tests/support/sam.py) for every parameter set the template tests use
(parameter_sets): only the configured stage exists; nothing a failed create
keeps has a name a retry would meet; the configurations a new account deploys
reserve no concurrency; every alarm hears its own metric whatever the others
do; every name fits, whatever the stack's name."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from localrun.template import STACK, Stack, Template
from tests.infra.test_template_reading import lint_errors_of
from tests.support.sam import created_in, parameter_sets, samconfig_overrides, translate_in

SETS = parameter_sets()
SET_IDS = [
    ",".join(f"{name}={'arn' if value.startswith('arn:') else value}" for name, value in each) or "defaults"
    for each in SETS
]
# Lambda keeps this much of a region's concurrency unreserved (Lambda developer
# guide, "Configuring reserved concurrency").
UNRESERVED_MINIMUM = 100


def created(overrides: dict[str, str], stack: Stack = STACK) -> dict[str, Any]:
    """The resources CloudFormation creates: those whose condition holds.
    Shared: read them, never change them."""
    return created_in(stack, **overrides)


def of_type(resources: dict[str, Any], resource_type: str) -> dict[str, Any]:
    return {k: r for k, r in resources.items() if r["Type"] == resource_type}


# -- 1. a new account deploys the defaults ------------------------------------------------


def reserved(resources: dict[str, Any]) -> dict[str, int]:
    return {
        logical_id: int(function["Properties"]["ReservedConcurrentExecutions"])
        for logical_id, function in of_type(resources, "AWS::Lambda::Function").items()
        if "ReservedConcurrentExecutions" in function["Properties"]
    }


@pytest.mark.parametrize("environment", ["defaults", "default", "scratch"])
def test_what_a_new_account_deploys_reserves_no_concurrency(environment):
    """The defaults reserved 100 + 100 + 5, and Lambda keeps 100 unreserved:
    an account whose quota is 10 or 50, as new ones are, failed the first
    deploy. The template's defaults, and samconfig.toml's [default] and
    [scratch] as they are, now reserve none."""
    overrides = {} if environment == "defaults" else samconfig_overrides(environment)
    assert reserved(created(overrides)) == {}


def test_production_reserves_what_the_deploy_page_says_it_needs():
    """[prod] carries the reservations: 100 for next and batch each, 5 for
    admin, which need a quota of 305 (docs/deploy.md says so)."""
    found = reserved(created(samconfig_overrides("prod")))
    assert found == {"NextFunction": 100, "BatchFunction": 100, "AdminFunction": 5}
    needed = sum(found.values()) + UNRESERVED_MINIMUM
    page = " ".join((Template().path.parent / "docs" / "deploy.md").read_text().split())
    assert f"at least {needed}" in page
    assert "ReservedConcurrency=100 AdminReservedConcurrency=5" in page


# -- 2. a failed first create can be retried ------------------------------------------------


def fixed_names(resource: dict[str, Any]) -> dict[str, Any]:
    """The names a template gives a resource itself: each create-only property
    of its type named ...Name and set to anything but a reference to another
    resource (a Ref or Fn::GetAtt: that resource's name)."""
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource["Type"]).schema
    names = {}
    for pointer in schema.get("createOnlyProperties", []):
        key = pointer.removeprefix("/properties/")
        value = resource.get("Properties", {}).get(key)
        if "/" in key or not key.endswith("Name") or value is None:
            continue
        if isinstance(value, dict) and set(value) & {"Ref", "Fn::GetAtt"}:
            continue
        names[key] = value
    return names


@pytest.mark.parametrize("overrides", SETS, ids=SET_IDS)
def test_nothing_a_failed_create_keeps_has_a_name_a_retry_would_meet(overrides):
    """The log groups were named /aws/lambda/<stack>-next (and -batch,
    -admin) and kept (DeletionPolicy Retain): a first create that failed
    rolled back and kept them, and the retry failed on "already exists".
    A resource the stack names itself is now deleted by a failed create
    (RetainExceptOnCreate, or not retained at all); those kept, the counters
    table, are named by CloudFormation, afresh on each create."""
    for logical_id, resource in created(dict(overrides)).items():
        if resource.get("DeletionPolicy") == "Retain":
            assert not fixed_names(resource), (logical_id, fixed_names(resource))


def test_the_log_groups_and_the_layer_are_kept_except_by_a_failed_create():
    resources = created({})
    kept = {k for k, r in resources.items() if r.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")}
    groups = set(of_type(resources, "AWS::Logs::LogGroup"))
    (layer,) = of_type(resources, "AWS::Lambda::LayerVersion")
    assert groups | {layer} <= kept
    for logical_id in groups | {layer}:
        assert resources[logical_id]["DeletionPolicy"] == "RetainExceptOnCreate", logical_id
        assert resources[logical_id]["UpdateReplacePolicy"] == "Retain", logical_id
    # The table keeps its counters even from a failed create: its name is CloudFormation's.
    table = resources["CountersTable"]
    assert (table["DeletionPolicy"], fixed_names(table)) == ("Retain", {})


def test_each_function_logs_to_its_declared_group_by_reference():
    """No function and no log group has a fixed name: each function is
    pointed at its group (LoggingConfig), and what reads a group or a
    function names it by Ref."""
    resources = created({})
    for logical_id, function in of_type(resources, "AWS::Lambda::Function").items():
        assert "FunctionName" not in function["Properties"], logical_id
        group = function["Properties"]["LoggingConfig"]["LogGroup"]
        assert set(group) == {"Ref"}
        assert resources[group["Ref"]]["Type"] == "AWS::Logs::LogGroup"
    for logical_id, group in of_type(resources, "AWS::Logs::LogGroup").items():
        assert "LogGroupName" not in group["Properties"], logical_id


# -- 3. one stage ------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", SETS, ids=SET_IDS)
def test_only_the_configured_stage_exists(overrides):
    """SAM gave its deployment StageName "Stage": every stack had a second
    live stage, unthrottled, untraced, without the usage plan, outside the
    alarms, whose requests were invoked and billed before the functions
    refused them. The API is now deployed to the configured stage only."""
    resources = created(dict(overrides))
    stages = of_type(resources, "AWS::ApiGateway::Stage")
    assert [stage["Properties"]["StageName"] for stage in stages.values()] == [
        Template(parameter_overrides=dict(overrides)).parameters["StageName"]
    ]
    for logical_id, deployment in of_type(resources, "AWS::ApiGateway::Deployment").items():
        assert "StageName" not in deployment["Properties"], logical_id
        assert "StageDescription" not in deployment["Properties"], logical_id
    assert not of_type(resources, "AWS::ApiGatewayV2::Stage")


@pytest.mark.parametrize("client_auth", ["AWS_IAM", "API_KEY"])
def test_the_published_template_deploys_one_stage_too(client_auth):
    from tests.support.sam import translate_sar

    settings = {"ClientAuth": client_auth}
    resources = translate_sar(settings)["Resources"]
    assert [r["Properties"]["StageName"] for r in of_type(resources, "AWS::ApiGateway::Stage").values()] == [
        {"Ref": "StageName"}
    ]
    for deployment in of_type(resources, "AWS::ApiGateway::Deployment").values():
        assert "StageName" not in deployment["Properties"]


# -- 6. alarms and missing data -----------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<symbol>[-+*/(),\[\]]))")
# Functions over an array of time series: a datapoint wherever any has one.
_OVER_ARRAYS = {"SUM", "MIN", "MAX", "AVG"}


def _tokens(expression: str) -> list[str]:
    found, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        assert match, f"cannot read {expression[position:]!r} of {expression!r}"
        found.append(match.group(match.lastgroup or ""))
        position = match.end()
    return found


def has_datapoint(expression: str, present: set[str]) -> bool:
    """Whether a metric math expression has a datapoint in a period where
    only the metrics ``present`` have one (CloudWatch, "Using metric math"):
    an arithmetic operator has none where an operand has none; SUM, MIN, MAX
    and AVG of an array have one where any member has; FILL(m, value) always
    has one. Anything else is not known here and fails the test."""
    tokens = _tokens(expression)

    def expect(symbol: str) -> None:
        found = tokens.pop(0) if tokens else None
        assert found == symbol, (expression, symbol, found)

    def primary() -> bool:
        token = tokens.pop(0)
        if token == "(":
            value = additive()
            expect(")")
            return value
        if token[0].isdigit():
            return True
        if tokens and tokens[0] == "(":
            tokens.pop(0)
            if token in _OVER_ARRAYS:
                expect("[")
                members = [additive()]
                while tokens[0] == ",":
                    tokens.pop(0)
                    members.append(additive())
                expect("]")
                expect(")")
                return any(members)
            if token == "FILL":
                additive()
                expect(",")
                primary()
                expect(")")
                return True
            raise AssertionError(f"{token}() in {expression!r}: say here how it treats missing data")
        return token in present

    def multiplicative() -> bool:
        value = primary()
        while tokens and tokens[0] in ("*", "/"):
            tokens.pop(0)
            value = primary() and value
        return value

    def additive() -> bool:
        value = multiplicative()
        while tokens and tokens[0] in ("+", "-"):
            tokens.pop(0)
            value = multiplicative() and value
        return value

    value = additive()
    assert not tokens, (expression, tokens)
    return value


def test_the_missing_data_reading_tells_sums_from_arrays():
    """The reading itself can fail: a + b has no datapoint when b has none."""
    assert not has_datapoint("a + b", {"a"})
    assert has_datapoint("a + b", {"a", "b"})
    assert has_datapoint("SUM([a, b])", {"b"})
    assert not has_datapoint("SUM([a, b])", set())
    assert has_datapoint("FILL(a, 0) + b * 2", {"b"})
    assert not has_datapoint("(a + b) / 60", {"a"})
    with pytest.raises(AssertionError, match="RATE"):
        has_datapoint("RATE(a)", {"a"})


@pytest.mark.parametrize("overrides", SETS, ids=SET_IDS)
def test_every_alarm_hears_each_of_its_metrics_alone(overrides):
    """FunctionErrorsAlarm summed nextErrors + batchErrors + adminErrors,
    which has no datapoint in a minute where one of them has none (admin is
    rarely called): with notBreaching, the alarm stayed quiet while next or
    batch failed. Each metric an alarm reads now reaches its expression on
    its own, whatever the others do."""
    for logical_id, alarm in of_type(created(dict(overrides)), "AWS::CloudWatch::Alarm").items():
        queries = alarm["Properties"].get("Metrics")
        if not queries:
            continue  # one metric, no expression
        inputs = {query["Id"] for query in queries if "MetricStat" in query}
        (returned,) = [query for query in queries if query.get("ReturnData", True)]
        for metric in sorted(inputs):
            assert has_datapoint(returned["Expression"], {metric}), (logical_id, metric)


# -- 7, 8, 9. names in any stack, as CloudFormation reads them -------------------------------

LONGEST = "a" * 128  # CloudFormation's longest stack name
# A nested stack's name: the parent's, the nested application's logical id
# (examples/nested-application: IdBlocks) and a suffix CloudFormation draws.
NESTED = "orders-platform-production-eu-west-1-IdBlocks-1X2Y3Z4A5B6C7"
STACKS = {"longest": Stack(name=LONGEST), "nested": Stack(name=NESTED, region="eu-west-1")}


def lint_errors(cfn: dict[str, Any], overrides: dict[str, str], stack: Stack) -> list[str]:
    """cfn-lint's errors on what CloudFormation creates (tests/infra/test_template_reading.py)."""
    return lint_errors_of(cfn, Template(parameter_overrides=overrides, stack=stack), stack.region)


@pytest.mark.parametrize("stack", STACKS.values(), ids=STACKS)
def test_every_name_fits_whatever_the_stack_is_called(stack):
    """The functions were named ${AWS::StackName}-batch: past Lambda's 64
    characters once the stack's name was longer than 58, as a nested stack's
    easily is. CloudFormation names them now, and every name the template
    builds from the stack's (the layer, the dashboard, the saved queries)
    fits its type's limits for the longest stack name CloudFormation takes,
    read by cfn-lint from CloudFormation's resource schemas."""
    assert len(stack.name) <= 128
    assert lint_errors(translate_in(stack), {}, stack) == []


def test_the_lint_reading_finds_a_name_too_long():
    """The check can fail: a function named after the longest stack name is
    past Lambda's limit."""
    function = {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": f"{LONGEST}-next"}}
    function["Properties"] |= {"Role": "arn:aws:iam::123456789012:role/r", "Code": {"ZipFile": "x"}}
    function["Properties"] |= {"Runtime": "python3.13", "Handler": "app.handler"}
    errors = lint_errors({"Resources": {"NextFunction": function}}, {}, STACKS["longest"])
    assert [error[:5] for error in errors] == ["E3031"], errors


@pytest.mark.parametrize("stack", STACKS.values(), ids=STACKS)
def test_each_stack_publishes_its_own_layer(stack):
    """SAM named the layer CoreLayer in every stack: all the stacks of an
    account and region published their versions into one layer."""
    (layer,) = of_type(created({}, stack), "AWS::Lambda::LayerVersion").values()
    name = layer["Properties"]["LayerName"]
    assert name == f"{stack.name}-core"
    other = Stack(name=f"{stack.name[:100]}-other", region=stack.region)
    (elsewhere,) = of_type(created({}, other), "AWS::Lambda::LayerVersion").values()
    assert elsewhere["Properties"]["LayerName"] != name
