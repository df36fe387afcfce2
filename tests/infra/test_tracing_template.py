"""The Tracing parameter: one switch for the functions' X-Ray mode (the
TracingConfig SAM makes of their Tracing property) and for the code's
tracer (POWERTOOLS_TRACE_DISABLED, which observability.py reads before it
loads the X-Ray SDK). The local runs read that variable from the template,
so localrun.template evaluates the template's Conditions and Fn::If."""

from __future__ import annotations

import pytest

from idblocks_core.observability import tracing_enabled
from localrun.tables import TABLE_NAMES
from localrun.template import Template
from tests.support.sam import translate

FUNCTIONS = ("NextFunction", "BatchFunction", "AdminFunction")


def test_tracing_is_on_unless_asked(template):
    spec = template.raw["Parameters"]["Tracing"]
    assert (spec["Default"], spec["AllowedValues"]) == ("Active", ["Active", "PassThrough"])


@pytest.mark.parametrize("mode", ["Active", "PassThrough"])
def test_one_parameter_drives_the_functions_mode_and_their_tracer(mode):
    cfn = translate(Tracing=mode)
    for logical_id in FUNCTIONS:
        props = cfn["Resources"][logical_id]["Properties"]
        assert props["TracingConfig"] == {"Mode": {"Ref": "Tracing"}}
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == {
            "Fn::If": ["TracingOn", "false", "true"]
        }
    # (the language extensions resolve the parameter in the condition)
    assert cfn["Conditions"]["TracingOn"] == {"Fn::Equals": [mode, "Active"]}


@pytest.mark.parametrize(("mode", "traced"), [("Active", True), ("PassThrough", False)])
def test_the_functions_environment_turns_the_tracer_on_and_off(mode, traced):
    for logical_id in FUNCTIONS:
        env = Template(parameter_overrides={"Tracing": mode}).environment(logical_id, TABLE_NAMES)
        assert env["POWERTOOLS_TRACE_DISABLED"] == ("false" if traced else "true")
        assert tracing_enabled(env) is traced


def test_the_default_environment_is_traced(template):
    assert tracing_enabled(template.environment("NextFunction", TABLE_NAMES)) is True


def test_conditions_are_evaluated_from_the_parameters():
    default = Template()
    assert default.condition("TracingOn") is True
    assert default.condition("HasAlarmTopic") is False  # Fn::Not of Fn::Equals
    assert default.condition("ClientAuthIsIam") is True
    changed = Template(
        parameter_overrides={
            "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:alarms",
            "ClientAuth": "API_KEY",
            "SnapStart": "Enabled",
        }
    )
    assert changed.condition("HasAlarmTopic") is True
    assert changed.condition("ClientAuthIsIam") is False
    assert changed.condition("ClientAuthIsApiKey") is True
    assert changed.condition("SnapStartOn") is True


def test_what_cannot_be_evaluated_locally_is_an_error_not_a_guess():
    template = Template()
    with pytest.raises(ValueError, match="no condition"):
        template.condition("NoSuchCondition")
    with pytest.raises(ValueError, match="cannot evaluate"):
        template._holds({"Fn::Contains": ["a", "b"]})
    with pytest.raises(ValueError, match="cannot resolve"):
        template._resolve({"Fn::GetAtt": ["CountersTable", "Arn"]}, {})
    assert (
        template._resolve({"Fn::If": ["TracingOn", {"Ref": "StageName"}, "x"]}, {})
        == template.parameters["StageName"]
    )
