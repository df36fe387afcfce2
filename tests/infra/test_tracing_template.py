"""Tracing, as CloudFormation sees the template after the SAM transform, in
each of its three modes: the default (Tracing Active: API Gateway and Lambda
trace from outside the functions, with no SDK in them), Disabled (nothing
traced, no X-Ray permission) and deep traces (OpenTelemetryLayerArn given:
AWS's OpenTelemetry layer wraps each function). What each mode grants is
what only AWS enforces, so it is read here, for every mode."""

from __future__ import annotations

import re
from typing import Any

import pytest

from localrun.tables import TABLE_NAMES
from localrun.template import Template
from tests.support.sam import translate

FUNCTIONS = ("NextFunction", "BatchFunction", "AdminFunction")
# As AWS publishes it for us-east-1 (the version number changes with each release).
LAYER_ARN = "arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython:13"
XRAY = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
APPLICATION_SIGNALS = "arn:aws:iam::aws:policy/CloudWatchLambdaApplicationSignalsExecutionRolePolicy"
BASIC = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
NO_VALUE = {"Ref": "AWS::NoValue"}

MODES = {
    "default": {},
    "disabled": {"Tracing": "Disabled"},
    "opentelemetry": {"OpenTelemetryLayerArn": LAYER_ARN},
}


def _holds(cfn: dict[str, Any], condition: Any) -> bool:
    """A condition as CloudFormation decides it; the language extensions have
    put the parameters' values in already."""
    if isinstance(condition, str):
        return _holds(cfn, cfn["Conditions"][condition])
    ((function, arguments),) = condition.items()
    if function == "Fn::Equals":
        left, right = arguments
        assert isinstance(left, str), condition
        assert isinstance(right, str), condition
        return left == right
    if function == "Fn::Not":
        return not _holds(cfn, arguments[0])
    raise AssertionError(f"unexpected {condition!r}")


def _decided(cfn: dict[str, Any], value: Any) -> Any:
    """``value`` with every Fn::If decided; NO_VALUE where it leaves it out."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        condition, if_true, if_false = value["Fn::If"]
        return _decided(cfn, if_true if _holds(cfn, condition) else if_false)
    if isinstance(value, list):
        return [item for item in (_decided(cfn, v) for v in value) if item != NO_VALUE]
    return value


def _parameter(cfn: dict[str, Any], value: Any, parameters: dict[str, str]) -> Any:
    """A Ref to a parameter, as given at deploy time (or its default)."""
    if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in cfn["Parameters"]:
        return parameters.get(value["Ref"], cfn["Parameters"][value["Ref"]].get("Default"))
    return value


def _core_layer_only(layers: list[Any]) -> bool:
    """The stack's own layer (SAM names its published version CoreLayer<hash>), alone."""
    return len(layers) == 1 and str(layers[0].get("Ref", "")).startswith("CoreLayer")


def deployed(mode: str) -> dict[str, Any]:
    """What each function and the stage get in ``mode``: tracing, layers,
    the wrapper variable, managed policies; every condition decided."""
    parameters = MODES[mode]
    cfn = translate(**parameters)
    (stage,) = [r for r in cfn["Resources"].values() if r["Type"] == "AWS::ApiGateway::Stage"]
    functions = {}
    for logical_id in FUNCTIONS:
        props = cfn["Resources"][logical_id]["Properties"]
        role = cfn["Resources"][f"{logical_id}Role"]["Properties"]
        tracing = props.get("TracingConfig", {}).get("Mode")
        variables = props["Environment"]["Variables"]
        functions[logical_id] = {
            "tracing": _parameter(cfn, tracing, parameters),
            "layers": [_parameter(cfn, layer, parameters) for layer in _decided(cfn, props["Layers"])],
            "wrapper": _decided(cfn, variables.get("AWS_LAMBDA_EXEC_WRAPPER", NO_VALUE)),
            "variables": set(variables),
            "managed": sorted(_decided(cfn, role["ManagedPolicyArns"])),
        }
    return {"stage_traced": _decided(cfn, stage["Properties"]["TracingEnabled"]), "functions": functions}


def test_the_default_is_aws_tracing_without_deep_traces(template):
    tracing = template.raw["Parameters"]["Tracing"]
    assert (tracing["Default"], tracing["AllowedValues"]) == ("Active", ["Active", "Disabled"])
    assert template.raw["Parameters"]["OpenTelemetryLayerArn"]["Default"] == ""


def test_by_default_api_gateway_and_lambda_trace_and_the_functions_may_write_only_to_xray():
    """Tracing Active: the stage traces each request, Lambda each invocation
    (TracingConfig Active, whose segments need X-Ray's write permission),
    and nothing wraps the functions: no wrapper, only the core's layer."""
    got = deployed("default")
    assert got["stage_traced"] is True
    for logical_id, function in got["functions"].items():
        assert function["tracing"] == "Active", logical_id
        assert function["wrapper"] == NO_VALUE
        assert _core_layer_only(function["layers"])
        assert function["managed"] == sorted([BASIC, XRAY])


def test_disabled_traces_nothing_and_grants_no_xray_permission():
    got = deployed("disabled")
    assert got["stage_traced"] is False
    for function in got["functions"].values():
        assert function["tracing"] is None  # no TracingConfig: Lambda's default, nothing recorded
        assert function["wrapper"] == NO_VALUE
        assert function["managed"] == [BASIC]


def test_deep_traces_add_the_layer_its_wrapper_and_its_permissions():
    """OpenTelemetryLayerArn given: the layer (before the core's, whose
    pinned packages then win), the wrapper that starts the runtime under
    OpenTelemetry, X-Ray's and Application Signals' write permissions."""
    got = deployed("opentelemetry")
    assert got["stage_traced"] is True
    for function in got["functions"].values():
        assert function["tracing"] == "Active"
        assert function["layers"][0] == LAYER_ARN
        assert _core_layer_only(function["layers"][1:])
        assert function["wrapper"] == "/opt/otel-instrument"
        assert function["managed"] == sorted([BASIC, XRAY, APPLICATION_SIGNALS])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_no_mode_sets_a_tracer_switch_for_the_code(mode):
    """The code has no tracer to switch: the variables Powertools' Tracer
    read are gone from every mode."""
    for function in deployed(mode)["functions"].values():
        assert not {v for v in function["variables"] if v.startswith("POWERTOOLS_TRACE")}


@pytest.mark.parametrize(
    ("parameters", "accepted"),
    [
        ({}, True),
        ({"Tracing": "Disabled"}, True),
        ({"OpenTelemetryLayerArn": LAYER_ARN}, True),
        ({"OpenTelemetryLayerArn": LAYER_ARN, "Tracing": "Disabled"}, False),
    ],
)
def test_deep_traces_without_tracing_are_refused_before_anything_is_deployed(parameters, accepted):
    """The layer sends its spans through the X-Ray endpoint Lambda runs for
    traced functions: with Tracing Disabled they would go nowhere. A
    CloudFormation rule refuses that pair of parameters with its reason."""
    template = Template(parameter_overrides=parameters)
    rules = template.raw["Rules"]
    assert rules == translate(**parameters)["Rules"]  # the transforms leave it to CloudFormation
    rule = rules["OpenTelemetryNeedsActiveTracing"]
    applies = template.holds(rule["RuleCondition"])
    holds = all(template.holds(assertion["Assert"]) for assertion in rule["Assertions"])
    assert (not applies or holds) is accepted
    assert "Tracing Active" in rule["Assertions"][0]["AssertDescription"]


@pytest.mark.parametrize(
    ("arn", "accepted"),
    [
        ("", True),
        (LAYER_ARN, True),
        ("arn:aws:lambda:af-south-1:904233096616:layer:AWSOpenTelemetryDistroPython:8", True),
        ("arn:aws-cn:lambda:cn-north-1:123456789012:layer:AWSOpenTelemetryDistroPython:3", True),
        ("arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython", False),  # no version
        ("arn:aws:lambda:us-east-1:615299751070:function:AWSOpenTelemetryDistroPython:13", False),
        ("/opt/otel-instrument", False),
        (f"{LAYER_ARN} ", False),
    ],
)
def test_the_layer_arn_must_be_a_layer_version(template, arn, accepted):
    """CloudFormation refuses a value that is not a layer version's ARN
    before anything is deployed (AllowedPattern)."""
    pattern = template.raw["Parameters"]["OpenTelemetryLayerArn"]["AllowedPattern"]
    assert (re.fullmatch(pattern, arn) is not None) is accepted


@pytest.mark.parametrize("mode", sorted(MODES))
def test_local_runs_load_only_the_stacks_own_layer(mode):
    """The dev server and the tests run the functions with the core's layer
    alone, whatever the mode: the OpenTelemetry layer is AWS's."""
    template = Template(parameter_overrides=MODES[mode])
    for spec in template.functions.values():
        assert [d.name for d in spec.layer_dirs] == ["core"]
    env = template.environment("NextFunction", TABLE_NAMES)
    assert ("AWS_LAMBDA_EXEC_WRAPPER" in env) is (mode == "opentelemetry")


def test_conditions_are_evaluated_from_the_parameters():
    default = Template()
    assert default.condition("TracingOn") is True
    assert default.condition("OpenTelemetryOn") is False
    assert default.condition("HasAlarmTopic") is False  # Fn::Not of Fn::Equals
    assert default.condition("ClientAuthIsIam") is True
    changed = Template(
        parameter_overrides={
            "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:alarms",
            "ClientAuth": "API_KEY",
            "SnapStart": "Enabled",
            "Tracing": "Disabled",
        }
    )
    assert changed.condition("HasAlarmTopic") is True
    assert changed.condition("ClientAuthIsIam") is False
    assert changed.condition("ClientAuthIsApiKey") is True
    assert changed.condition("SnapStartOn") is True
    assert changed.condition("TracingOn") is False


def test_what_cannot_be_evaluated_locally_is_an_error_not_a_guess():
    template = Template()
    with pytest.raises(ValueError, match="no condition"):
        template.condition("NoSuchCondition")
    with pytest.raises(ValueError, match="cannot evaluate"):
        template.holds({"Fn::Contains": ["a", "b"]})
    assert template.holds({"Fn::Equals": [{"Ref": "StageName"}, template.parameters["StageName"]]})
    assert template.holds({"Condition": "TracingOn"})
