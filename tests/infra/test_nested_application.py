"""The nested-application example (examples/nested-application/template.yaml,
shown on docs/nested-application.md) is a user's SAM template with idblocks
inside it: nested from this repository's template.yaml by its path, and, in
a comment, from the Serverless Application Repository by the published
application's id. cfn-lint cannot see into a nested application, so what
the example asks of idblocks is checked here against both templates: each
parameter it passes is one both declare, with a value both allow, each
output it reads is one both always have, and the published application it
names is of the current version. make lint runs cfn-lint and
`sam validate --lint` on it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from samcli.yamlhelper import yaml_parse

from localrun.template import ROOT, TEMPLATE, default_template
from scripts.sar_template import build

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


def templates() -> dict[str, dict[str, Any]]:
    """What the example may nest: template.yaml, or the published template."""
    return {"template.yaml": default_template().raw, "the published template": build().template}


def test_the_example_nests_this_repositorys_template_by_its_path(example):
    _, app = nested(example)
    location = app["Properties"]["Location"]
    assert isinstance(location, str), f"Location is {dict(location)}, not a path"
    assert (EXAMPLE.parent / location).resolve() == TEMPLATE


@pytest.mark.parametrize("which", ["template.yaml", "the published template"])
def test_the_example_passes_only_parameters_idblocks_declares_with_allowed_values(example, which):
    """It passed ClientAuth, which the published application decides and
    does not take: CloudFormation refuses a parameter a template lacks."""
    declared = templates()[which]["Parameters"]
    _, app = nested(example)
    passed = app["Properties"]["Parameters"]
    assert passed, "the example shows how parameters are passed"
    for name, value in passed.items():
        assert name in declared, f"{which} has no parameter {name}"
        allowed = declared[name].get("AllowedValues")
        if allowed is not None:
            assert str(value) in [str(v) for v in allowed], f"{name}={value}: {which} allows {allowed}"
        pattern = declared[name].get("AllowedPattern")
        if pattern is not None:
            assert re.fullmatch(pattern, str(value)), f"{name}={value} does not match {pattern}"


@pytest.mark.parametrize("which", ["template.yaml", "the published template"])
def test_the_example_reads_only_outputs_idblocks_always_has(example, which):
    outputs = templates()[which]["Outputs"]
    logical_id, _ = nested(example)
    read = set(re.findall(rf"{logical_id}\.Outputs\.(\w+)", EXAMPLE.read_text()))
    assert read, "the example reads the nested stack's outputs"
    assert read <= {name for name, output in outputs.items() if "Condition" not in output}, read


def shown_repository_location() -> dict[str, Any]:
    """The Location the example's comment shows for the published application."""
    found = re.search(r"^( *)#   Location:\n((?:\1#     .*\n)+)", EXAMPLE.read_text(), re.MULTILINE)
    assert found, "the example shows how to nest the published application"
    block = "".join(line.split("#", 1)[1][5:] + "\n" for line in found[2].splitlines())
    return yaml_parse(block)


def test_the_example_shows_the_current_version_of_the_published_application():
    location = shown_repository_location()
    metadata = build().template["Metadata"]["AWS::ServerlessRepo::Application"]
    assert str(location["SemanticVersion"]) == str(metadata["SemanticVersion"])
    assert re.fullmatch(
        rf"arn:aws:serverlessrepo:[a-z0-9-]+:\d{{12}}:applications/{metadata['Name']}",
        location["ApplicationId"],
    )


def test_the_page_shows_the_example_file_itself():
    page = (ROOT / "docs" / "nested-application.md").read_text()
    assert '--8<-- "examples/nested-application/template.yaml"' in page
