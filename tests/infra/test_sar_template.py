"""The template the Serverless Application Repository publishes, which `make
sar` (scripts/sar_template.py) makes from template.yaml: what the repository
accepts (the SAM transform alone, resource types on its list, before and
after the SAM transform), clean under cfn-lint and `sam validate --lint`,
and, once transformed and deployed, the stack template.yaml deploys with the
same parameter values, save what docs/nested-application.md says the
published application leaves out. Each published variant a publisher may
make (--set) is held to the same."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from localrun.template import NO_VALUE, ROOT, STACK, Template, default_template
from scripts import sar_template
from scripts.sar_template import (
    DECIDED,
    LEFT_OUT,
    SERVERLESS,
    SarTemplateError,
    build,
    supported_types,
    write,
)
from tests.support.sam import cached_build, parameter_defaults, transform_sam, translate, translate_sar

OTEL_ARN = "arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython:5"
# The published application, and the variants a publisher may make of it.
VARIANTS = [{}, {"ClientAuth": "API_KEY"}, {"ClientAuth": "NONE"}]
VARIANT_IDS = ["published", "api-key", "no-auth"]
# Parameter values that switch what the template switches: a custom domain
# (its resources and outputs), GET next off, no tracing, no reserved
# concurrency, another stage, a prefix of counters, an alarm topic, debug
# logs, and a daily quota (in a variant that has it, API_KEY).
OTHER_VALUES = {
    "StageName": "prod",
    "CustomDomainName": "ids.example.com",
    "CustomDomainCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/abc",
    "DisableExecuteApiEndpoint": "true",
    "AllowGetNext": "false",
    "Tracing": "Disabled",
    "ReservedConcurrency": "0",
    "ClientCounters": "team-a-*",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops",
    "LogLevel": "DEBUG",
    "UsageQuotaPerDay": "1000",
}
# Deep traces: AWS's OpenTelemetry layer, its wrapper and its permissions.
DEEP_TRACES = {"OpenTelemetryLayerArn": OTEL_ARN}
VALUE_SETS = [{}, OTHER_VALUES, DEEP_TRACES]
VALUE_SET_IDS = ["defaults", "other-values", "deep-traces"]
SAM_ENV = os.environ | {"SAM_CLI_TELEMETRY": "0"}
# This environment's tools, not whichever are first on PATH.
VENV_BIN = Path(sys.executable).parent


def refusals(template: dict[str, Any]) -> list[str]:
    """What the repository refuses a template for: a transform other than
    SAM's, a resource type off its list."""
    found = []
    transforms = template.get("Transform", [])
    transforms = [transforms] if isinstance(transforms, str) else transforms
    if transforms != [SERVERLESS]:
        found.append(f"Provided Transform {transforms} is unsupported")
    types = {resource["Type"] for resource in template["Resources"].values()} - supported_types()
    if types:
        found.append(f"unsupported resource types {sorted(types)}")
    return found


def values_for(settings: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    """``values`` a stack of the variant takes: its own parameters only."""
    parameters = cached_build(settings).template["Parameters"]
    return {name: value for name, value in values.items() if name in parameters}


def published_values(settings: dict[str, str], **overrides: str) -> dict[str, str]:
    """Every template.yaml parameter's value in a stack of the published
    variant: its decided values, the overrides, the defaults."""
    sar = cached_build(settings)
    return parameter_defaults(sar.template) | sar.decided | overrides


# -- what the repository accepts ---------------------------------------------------------


def test_the_repository_refuses_template_yaml_as_it_is():
    """Why a template is made for it: template.yaml runs the language
    extensions first (the repository answers "Provided Transform [...] is
    unsupported"), and saves Logs Insights queries, a type off its list."""
    assert refusals(default_template().raw) == [
        "Provided Transform ['AWS::LanguageExtensions', 'AWS::Serverless-2016-10-31'] is unsupported",
        "unsupported resource types ['AWS::Logs::QueryDefinition']",
    ]


@pytest.mark.parametrize("settings", VARIANTS, ids=VARIANT_IDS)
def test_the_repository_refuses_nothing_in_the_published_template(settings):
    assert refusals(cached_build(settings).template) == []


@pytest.mark.parametrize("settings", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_SET_IDS)
def test_every_resource_the_sam_transform_makes_of_it_is_one_the_repository_accepts(settings, values):
    """What CloudFormation creates from it: IAM roles, Lambda permissions,
    the API's deployment and stage, a usage plan..."""
    cfn = translate_sar(settings, **values_for(settings, values))
    made = {resource["Type"] for resource in cfn["Resources"].values()}
    assert made - supported_types() == set()
    assert {"AWS::IAM::Role", "AWS::Lambda::Permission", "AWS::ApiGateway::Deployment"} <= made


def test_the_supported_list_says_where_and_when_it_was_read():
    data = json.loads(sar_template.SUPPORTED_LIST.read_text())
    assert (
        data["source"]
        == "https://docs.aws.amazon.com/serverlessrepo/latest/devguide/list-supported-resources.html"
    )
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["read"])
    assert len(data["types"]) == len(set(data["types"])) > 100
    assert all(re.fullmatch(r"AWS::\w+::\w+", name) for name in data["types"])
    assert set(LEFT_OUT) & set(data["types"]) == set(), "a type on the list need not be left out"


@pytest.mark.parametrize("settings", VARIANTS, ids=VARIANT_IDS)
def test_the_published_template_lints_clean(settings, tmp_path):
    """cfn-lint and `sam validate --lint` on the file `make sar` writes."""
    path = write(build(settings), tmp_path / "sar" / "template.yaml")
    for command in (
        [str(VENV_BIN / "cfn-lint"), str(path)],
        [str(VENV_BIN / "sam"), "validate", "--lint", "-t", str(path)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=SAM_ENV, cwd=tmp_path)
        assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}{done.stderr}"


def test_the_written_template_points_at_this_repositorys_code_license_and_readme(tmp_path):
    """sam build and sam package read the code, the layer, the license and
    the README from paths relative to the template: written elsewhere, it
    still names the repository's own."""
    sar = build()
    path = write(sar, tmp_path / "somewhere" / "template.yaml")
    written = Template(path)
    source = default_template()
    app = "AWS::ServerlessRepo::Application"
    metadata, original_metadata = written.raw["Metadata"][app], source.raw["Metadata"][app]
    for key in ("LicenseUrl", "ReadmeUrl"):
        assert (path.parent / metadata[key]).resolve() == ROOT / original_metadata[key]
    for logical_id, resource in written.resources.items():
        for key in ("CodeUri", "ContentUri"):
            if key in resource["Properties"]:
                original = ROOT / source.resources[logical_id]["Properties"][key]
                assert (path.parent / resource["Properties"][key]).resolve() == original.resolve()
    assert path.read_text().startswith("# Generated by `make sar`")


# -- what it deploys -----------------------------------------------------------------------


def deployed(cfn: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """The resources and outputs of a transformed template as CloudFormation
    creates them for a stack with these parameter values: each condition
    decided as template.yaml's of that name, an entry whose condition is false
    left out, each Fn::If's branch taken, AWS::NoValue left out, parameters
    and pseudo parameters (Ref, ${Name} in Fn::Sub) replaced by their values
    (those of the stack the tests describe, STACK). An Fn::Sub left with no
    variable is its text, as the language extensions write it."""
    source = Template(parameter_overrides=values)
    known = source.parameters | STACK.values

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in map(resolve, value) if item != NO_VALUE]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Fn::If"}:
            name, if_true, if_false = value["Fn::If"]
            return resolve(if_true if source.condition(name) else if_false)
        if set(value) == {"Ref"} and value["Ref"] in known:
            return known[value["Ref"]]
        if set(value) == {"Fn::Sub"}:
            text, own = value["Fn::Sub"] if isinstance(value["Fn::Sub"], list) else (value["Fn::Sub"], {})
            text = re.sub(
                r"\$\{([\w:]+)\}",
                lambda found: found[0] if found[1] in own else known.get(found[1], found[0]),
                text,
            )
            if own:
                return {"Fn::Sub": [text, resolve(own)]}
            return {"Fn::Sub": text} if re.search(r"\$\{[^!]", text) else text.replace("${!", "${")
        return {key: item for key, item in ((k, resolve(v)) for k, v in value.items()) if item != NO_VALUE}

    return {
        section: {
            name: resolve({key: item for key, item in entry.items() if key != "Condition"})
            for name, entry in source.kept(cfn.get(section, {})).items()
        }
        for section in ("Resources", "Outputs")
    }


def as_published(stack: dict[str, Any], stage: str) -> dict[str, Any]:
    """A deployed template.yaml stack with what the published template does
    otherwise written its way: the API invokes each function itself, not
    its alias "live" (no versions, no aliases); SAM names the stage and the
    permissions after a StageName it did not resolve ("ApiStage", not
    "Apiv1Stage"); the deployment's name and description hash the API's
    definition, so they differ with it."""
    resources = dict(stack["Resources"])
    functions = {name for name, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    for name, resource in list(resources.items()):
        if resource["Type"] in ("AWS::Lambda::Version", "AWS::Lambda::Alias"):
            assert resource["Properties"]["FunctionName"] in [{"Ref": f} for f in functions], name
            del resources[name]
    text = json.dumps({"Resources": resources, "Outputs": stack["Outputs"]})
    for function in functions:
        text = text.replace(f'{{"Ref": "{function}Aliaslive"}}', f'{{"Ref": "{function}"}}')
        text = text.replace(f"${{{function}Aliaslive}}", f"${{{function}.Arn}}")
    text = text.replace(f'"Api{stage}Stage"', '"ApiStage"')
    text = re.sub(rf'Permission{stage}"', 'PermissionStage"', text)
    return json.loads(text)


def without_generated_names(stack: dict[str, Any]) -> dict[str, Any]:
    """A stack with the names SAM makes up where they follow from what they
    name, not from what they do: the API deployment's (a hash of the API's
    definition), the layer version's (a hash of its properties, where
    template.yaml's layer name is the stack's, resolved, and the published
    template's its Fn::Sub) and each inline role policy's (its place in the
    function's Policies, where the published template still has the
    OpenTelemetry policy's Fn::If before it)."""
    text = re.sub(r"(ApiDeployment|CoreLayer)[0-9a-f]{10}", r"\1", json.dumps(stack))
    text = re.sub(r"RestApi deployment id: [0-9a-f]{40}", "RestApi deployment id: (hash)", text)
    return json.loads(re.sub(r'"PolicyName": "(\w+Role)Policy\d+"', r'"PolicyName": "\1Policy"', text))


@pytest.mark.parametrize("settings", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_SET_IDS)
def test_the_published_template_deploys_what_template_yaml_deploys(settings, values):
    """Every resource, property, route, authorizer, policy and output, as
    CloudFormation creates them with the same parameter values, is
    template.yaml's, save the resources LEFT_OUT and the functions' aliases
    and versions (as_published says what that changes)."""
    values = values_for(settings, values)
    full = published_values(settings, **values)
    cfn = translate_sar(settings, **values)
    conditions = default_template().raw["Conditions"]
    assert {name: conditions[name] for name in cfn["Conditions"]} == cfn["Conditions"]
    published = without_generated_names(deployed(cfn, full))
    source = as_published(deployed(translate(**full), full), stage=full["StageName"])
    source = without_generated_names(source)
    left_out = {name for name, r in source["Resources"].items() if r["Type"] in LEFT_OUT}
    assert left_out == set(cached_build(settings).left_out)
    for name in left_out:
        del source["Resources"][name]
    assert sorted(published["Resources"]) == sorted(source["Resources"])
    for name, resource in source["Resources"].items():
        assert published["Resources"][name] == resource, name
    assert published["Outputs"] == source["Outputs"]


def test_every_route_is_signed_and_api_gateway_invokes_as_itself():
    """The published application's callers sign (AWS_IAM) on every route,
    none needs an API key, and no integration carries the caller's
    credentials (the API's InvokeRole NONE)."""
    api = cached_build().template["Resources"]["Api"]["Properties"]
    assert api["Auth"] == {"DefaultAuthorizer": "AWS_IAM", "InvokeRole": "NONE"}
    body = translate_sar()["Resources"]["Api"]["Properties"]["Body"]
    operations = {(m.upper(), p): op for p, ops in body["paths"].items() for m, op in ops.items()}
    assert len(operations) == 8
    for route, operation in operations.items():
        assert operation["security"] == [{"AWS_IAM": []}], route
        assert "credentials" not in operation["x-amazon-apigateway-integration"], route
    assert "api_key" not in body.get("securityDefinitions", {})


@pytest.mark.parametrize(
    "change",
    [{"LogLevel": "DEBUG"}, {"AllowGetNext": "false"}, {"MaxBatchSize": "10"}, {"FunctionTimeout": "20"},
     {"RegionCount": "2", "RegionIndex": "1"}, {"AutoCreateCounters": "true"}, DEEP_TRACES],
    ids=lambda change: ",".join(change),
)  # fmt: skip
def test_an_update_that_changes_only_a_parameter_reaches_what_the_api_invokes(change):
    """Without the language extensions nothing resolves a parameter before
    SAM names a function's version, so a version behind an alias would keep
    its name and its old settings through such an update, and the alias
    with it. Each route's integration must reach the function's own
    settings, or a version that is new with them."""
    before, after = translate_sar(), translate_sar(**change)
    for cfn in (before, after):
        assert {r["Type"] for r in cfn["Resources"].values()} >= {"AWS::Lambda::Function"}

    def invoked(cfn: dict[str, Any]) -> dict[tuple[str, str], str]:
        body = cfn["Resources"]["Api"]["Properties"]["Body"]
        targets = {}
        for path, operations in body["paths"].items():
            for method, operation in operations.items():
                uri = operation["x-amazon-apigateway-integration"]["uri"]
                uri = uri["Fn::Sub"] if isinstance(uri, dict) else uri
                (name,) = re.findall(r"/functions/\$\{(\w+)(?:\.Arn)?\}/invocations", uri)
                resource = cfn["Resources"][name]
                if resource["Type"] == "AWS::Lambda::Alias":
                    name = resource["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
                targets[method.upper(), path] = f"{cfn['Resources'][name]['Type']} {name}"
        return targets

    old, new = invoked(before), invoked(after)
    for route, target in old.items():
        assert target.startswith("AWS::Lambda::Function ") or new[route] != target, route


def test_sam_alone_names_a_version_the_same_whatever_a_parameters_value():
    """Why the published template has no alias: the published template with
    template.yaml's alias put back, transformed by SAM alone, names each
    version alike for LogLevel INFO and DEBUG, so an update would publish
    nothing. Should a SAM release resolve parameters first, this fails, and
    the alias (and SnapStart) may come back."""
    template = build().template
    template["Globals"]["Function"]["AutoPublishAlias"] = "live"
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["AutoPublishAliasAllProperties"] = True
    parameters = parameter_defaults(template)

    def versions(log_level: str) -> set[str]:
        cfn = transform_sam(template, parameters | {"LogLevel": log_level})
        return {name for name, r in cfn["Resources"].items() if r["Type"] == "AWS::Lambda::Version"}

    assert len(versions("INFO")) == 3
    assert versions("INFO") == versions("DEBUG")


# -- what it keeps of template.yaml -------------------------------------------------------


def test_the_published_parameters_are_template_yamls_but_the_decided_ones():
    """In template.yaml's order and words; the decided parameters and those
    nothing reads once they are decided (the page names both) are gone."""
    sar = cached_build()
    source = default_template().raw["Parameters"]
    assert sar.unused_parameters == ("UsageQuotaPerDay",)
    kept = [name for name in source if name not in DECIDED and name not in sar.unused_parameters]
    assert list(sar.template["Parameters"]) == kept
    for name in kept:
        assert sar.template["Parameters"][name] == source[name], name


def test_the_published_metadata_is_template_yamls():
    """The same application (name, license, readme, the project's one
    version: tests/infra/test_release.py holds it to the others)."""
    assert cached_build().template["Metadata"] == default_template().raw["Metadata"]


def test_the_page_says_what_the_published_application_decides_and_leaves_out():
    page = (ROOT / "docs" / "nested-application.md").read_text()
    sar = cached_build()
    for name, value in DECIDED.items():
        assert f"`{name}`" in page, name
        assert f"`{value}`" in page, value
    for name in (*sar.unused_parameters, *LEFT_OUT, *sar.left_out):
        assert f"`{name}`" in page, name
    assert "make sar" in page
    assert "sam publish --template" in page


def test_a_decided_no_value_leaves_its_key_or_entry_out_but_stays_as_an_argument():
    """CloudFormation's reading of AWS::NoValue, for the Fn::If the template
    does not have today: in a list or a mapping it leaves its place out; as
    an argument of another function (an Fn::If on a parameter still to
    come) it stays, or that function would lose an argument."""
    fixed = {"IsIam": True, "IsKey": False}
    fragment = {
        "Layers": [{"Fn::If": ["IsKey", "arn:layer", NO_VALUE]}, {"Ref": "CoreLayer"}],
        "Auth": {
            "Authorizer": {"Fn::If": ["IsIam", "AWS_IAM", "NONE"]},
            "Key": {"Fn::If": ["IsKey", True, NO_VALUE]},
        },
        "Quota": {"Fn::If": ["HasQuota", {"Fn::If": ["IsKey", 5, NO_VALUE]}, NO_VALUE]},
        "Mode": {"Ref": "ClientAuth"},
    }
    assert sar_template._decide(fragment, fixed, {"ClientAuth": "AWS_IAM"}) == {
        "Layers": [{"Ref": "CoreLayer"}],
        "Auth": {"Authorizer": "AWS_IAM"},
        "Quota": {"Fn::If": ["HasQuota", NO_VALUE, NO_VALUE]},
        "Mode": "AWS_IAM",
    }


# -- what a publisher may not ask for -----------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"SnapStart": "Enabled"}, "may be set for a published variant"),
        ({"StageName": "prod"}, "may be set for a published variant"),
        ({"ClientAuth": "SIGV4"}, "ClientAuth takes AWS_IAM, API_KEY, NONE, not 'SIGV4'"),
        ({"OpenTelemetryLayerArn": OTEL_ARN}, "may be set for a published variant"),
    ],
)
def test_a_variant_the_template_cannot_make_is_refused_with_its_reason(settings, said):
    with pytest.raises(SarTemplateError, match=re.escape(said)):
        build(settings)


def test_the_command_writes_nothing_when_it_refuses(tmp_path, capsys):
    output = tmp_path / "template.yaml"
    assert sar_template.main(["--output", str(output), "--set", "ClientAuth=SIGV4"]) == 2
    assert not output.exists()
    assert "ClientAuth takes AWS_IAM, API_KEY, NONE" in capsys.readouterr().err
    assert sar_template.main(["--output", str(output)]) == 0
    assert Template(output).raw["Transform"] == SERVERLESS


def test_make_sar_writes_and_lints_the_published_template():
    rule = (ROOT / "Makefile").read_text().split("\nsar:", 1)[1].split("\n\n", 1)[0]
    assert "python -m scripts.sar_template" in rule
    assert "cfn-lint $(SAR_TEMPLATE)" in rule
    assert "sam validate --lint -t $(SAR_TEMPLATE)" in rule


def test_transform_sam_alone_refuses_template_yaml():
    """What the published template is for: without the language extensions,
    SAM itself cannot read template.yaml's Fn::If on ClientAuth."""
    template = default_template().raw | {"Transform": SERVERLESS}
    with pytest.raises(Exception, match="Authorizer"):
        transform_sam(template, default_template().parameters)
