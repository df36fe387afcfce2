"""The SnapStart switch, read from what the SAM transform makes of
template.yaml: versions, the alias, and API Gateway invoking the alias."""

from __future__ import annotations

import copy
import json

import pytest
from samcli.lib.cfn_language_extensions.api import process_template
from samtranslator.translator.transform import transform

from localrun.template import default_template
from tests.support.sam import translate

FUNCTIONS = ("NextFunction", "BatchFunction", "AdminFunction")


def of_type(cfn, resource_type):
    return {k: r for k, r in cfn["Resources"].items() if r["Type"] == resource_type}


def test_snapstart_is_off_unless_asked(template):
    assert template.raw["Parameters"]["SnapStart"]["Default"] == "Disabled"
    assert template.raw["Parameters"]["SnapStart"]["AllowedValues"] == ["Enabled", "Disabled"]


@pytest.mark.parametrize(("switch", "apply_on"), [("Enabled", "PublishedVersions"), ("Disabled", "None")])
def test_each_function_has_a_version_and_the_alias_the_api_invokes(switch, apply_on):
    """On and off alike, every function is published behind the alias
    "live", and every API permission and integration names that alias, so
    that restored snapshots (on) and plain versions (off) serve the API."""
    cfn = translate(SnapStart=switch)
    versions, aliases = of_type(cfn, "AWS::Lambda::Version"), of_type(cfn, "AWS::Lambda::Alias")
    for function in FUNCTIONS:
        assert cfn["Resources"][function]["Properties"]["SnapStart"] == {"ApplyOn": apply_on}
        (version,) = [v for k, v in versions.items() if k.startswith(f"{function}Version")]
        assert version["Properties"]["FunctionName"] == {"Ref": function}
        alias = aliases[f"{function}Aliaslive"]
        assert alias["Properties"]["Name"] == "live"
        assert alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][1] == "Version"
    permissions = of_type(cfn, "AWS::Lambda::Permission").values()
    assert permissions
    assert {json.dumps(p["Properties"]["FunctionName"]) for p in permissions} == {
        json.dumps({"Ref": f"{f}Aliaslive"}) for f in FUNCTIONS
    }
    (api,) = of_type(cfn, "AWS::ApiGateway::RestApi").values()
    uris = [
        op["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
        for path in api["Properties"]["Body"]["paths"].values()
        for op in path.values()
        if "x-amazon-apigateway-integration" in op
    ]
    assert len(uris) == 8
    assert all("Aliaslive}/invocations" in uri for uri in uris), uris


def version_ids(snap_start: str, layer_uri: str) -> set[str]:
    template = default_template()
    parameters = template.parameters | {"SnapStart": snap_start}
    expanded = process_template(copy.deepcopy(template.raw), parameter_values=parameters)
    expanded["Transform"] = "AWS::Serverless-2016-10-31"
    for logical_id, resource in expanded["Resources"].items():
        props = resource.get("Properties", {})
        if "CodeUri" in props:
            props["CodeUri"] = f"s3://bucket/{logical_id}-code"
        if "ContentUri" in props:
            props["ContentUri"] = layer_uri  # `sam package` names it after the layer's content
    cfn = transform(expanded, parameters, None)
    return set(of_type(cfn, "AWS::Lambda::Version"))


def test_a_layer_only_change_publishes_new_versions():
    """SAM names a version after the function's own code by default, so a
    deployment that changes only the layer kept the alias on the old version
    (and, with SnapStart, on a snapshot of the old layer)."""
    before = version_ids("Enabled", "s3://bucket/layer-aaaa")
    after = version_ids("Enabled", "s3://bucket/layer-bbbb")
    assert len(before) == len(after) == 3
    assert not before & after


def test_switching_snapstart_publishes_new_versions():
    """The snapshot is taken when a version is published: switching SnapStart
    on without a new version would leave the alias on a version without one."""
    on = version_ids("Enabled", "s3://bucket/layer-aaaa")
    off = version_ids("Disabled", "s3://bucket/layer-aaaa")
    assert len(on) == len(off) == 3
    assert not on & off
