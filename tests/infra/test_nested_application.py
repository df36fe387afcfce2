"""The nested-application example (examples/nested-application/template.yaml,
shown on docs/nested-application.md) is a user's SAM template with idblocks
inside it. cfn-lint cannot see into an application of the Serverless
Application Repository, so what the example asks of idblocks is checked
against template.yaml here: each parameter it passes is one idblocks
declares, with a value it allows, each output it reads is one idblocks has,
and it runs the current version. make lint runs cfn-lint and
`sam validate --lint` on it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from samcli.yamlhelper import yaml_parse

from localrun.template import ROOT, default_template

EXAMPLE = ROOT / "examples" / "nested-application" / "template.yaml"


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return yaml_parse(EXAMPLE.read_text())


def nested(example: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    found = [
        (logical_id, resource)
        for logical_id, resource in example["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Application"
    ]
    assert len(found) == 1, "the example nests idblocks once"
    return found[0]


def test_the_example_passes_only_parameters_idblocks_declares_with_allowed_values(example):
    declared = default_template().raw["Parameters"]
    _, app = nested(example)
    passed = app["Properties"]["Parameters"]
    assert passed, "the example shows how parameters are passed"
    for name, value in passed.items():
        assert name in declared, f"idblocks has no parameter {name}"
        allowed = declared[name].get("AllowedValues")
        if allowed is not None:
            assert str(value) in [str(v) for v in allowed], f"{name}={value}: idblocks allows {allowed}"
        pattern = declared[name].get("AllowedPattern")
        if pattern is not None:
            assert re.fullmatch(pattern, str(value)), f"{name}={value} does not match {pattern}"


def test_the_example_reads_only_outputs_idblocks_has(example):
    outputs = default_template().raw["Outputs"]
    logical_id, _ = nested(example)
    text = EXAMPLE.read_text()
    read = set(re.findall(rf"{logical_id}\.Outputs\.(\w+)", text))
    assert read, "the example reads the nested stack's outputs"
    assert read <= {name for name, output in outputs.items() if "Condition" not in output}, read


def test_the_example_runs_the_current_version_from_the_repository(example):
    _, app = nested(example)
    location = app["Properties"]["Location"]
    version = default_template().raw["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"]
    assert str(location["SemanticVersion"]) == str(version)
    name = default_template().raw["Metadata"]["AWS::ServerlessRepo::Application"]["Name"]
    assert re.fullmatch(
        rf"arn:aws:serverlessrepo:[a-z0-9-]+:\d{{12}}:applications/{name}", location["ApplicationId"]
    )


def test_the_page_shows_the_example_file_itself():
    page = (ROOT / "docs" / "nested-application.md").read_text()
    assert '--8<-- "examples/nested-application/template.yaml"' in page
