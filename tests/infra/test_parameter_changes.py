"""What an update that changes a parameter does to a deployed stack
(scripts/parameter_changes.py reads it from template.yaml as CloudFormation
deploys it, before and after): nothing callers hold (a policy, the table, the
log groups, the layer, the API, its stage, its domain, the usage plan) is
replaced or deleted unless docs/deploy.md's table says so and why, and a
change API Gateway applies only to a new deployment gets one."""

from __future__ import annotations

import functools
import re

import pytest

from localrun.template import ROOT, Template, default_template
from scripts import parameter_changes
from scripts.parameter_changes import ON_PURPOSE, Change, all_changes, change, changes_of, on_purpose

DEPLOY = ROOT / "docs" / "deploy.md"
# Which changes there are comes from the parameters alone; what each does
# takes a SAM transform before and after, worked out in the tests that read
# it, not while every pytest-xdist worker collects this file.
CASES = [
    (parameter, settings, before, after)
    for parameter in default_template().raw["Parameters"]
    for settings, before, after in changes_of(parameter)
]
CHANGE_IDS = [
    f"{parameter}:{before or 'empty'}->{after or 'empty'}"[:50] for parameter, _, before, after in CASES
]


@functools.cache
def changes() -> tuple[Change, ...]:
    return tuple(all_changes())


def described_change(case: tuple[str, dict[str, str], str, str]) -> Change:
    parameter, settings, before, after = case
    return change(parameter, before, after, settings)


def test_every_parameter_has_a_change_described():
    """A parameter added to template.yaml without a described change fails
    here, not silently out of the table."""
    assert {each.parameter for each in changes()} == set(Template().parameters)


@pytest.mark.parametrize("case", CASES, ids=CHANGE_IDS)
def test_no_change_replaces_or_deletes_what_callers_hold_unless_on_purpose(case):
    on_purpose(described_change(case))  # raises, naming the resource, where one is not


def test_every_reason_given_is_for_a_change_that_needs_it():
    used = {
        (each.parameter, dict(each.types)[logical_id])
        for each in changes()
        for logical_id in (*each.held(each.replaced), *each.held(each.deleted))
    }
    assert set(ON_PURPOSE) == used


def test_a_replaced_policy_is_caught():
    """The check can fail: ClientPolicy's Description named the counters
    (main before this change), and a managed policy's Description is
    create-only."""
    assert ("Description",) in parameter_changes.create_only("AWS::IAM::ManagedPolicy")
    with pytest.raises(ValueError, match="replaces ClientPolicy \\(policy\\)"):
        on_purpose(
            parameter_changes.Change(
                parameter="ClientCounters",
                before="*",
                after="orders",
                settings=(),
                updated=(),
                replaced=("ClientPolicy",),
                created=(),
                deleted=(),
                types=(("ClientPolicy", "AWS::IAM::ManagedPolicy"),),
            )
        )


def test_changing_the_client_counters_updates_the_client_policy_in_place():
    """ClientPolicy's Description named ClientCounters' value, and a managed
    policy's Description is fixed at creation: each change replaced the
    policy, its ARN changed under every role it was attached to (or its
    deletion failed, DeleteConflict, leaving the old, broader one). Now the
    change only updates the policy's document."""
    described = change("ClientCounters", "*", "orders")
    assert described.updated == ("ClientPolicy",)
    assert (described.replaced, described.created, described.deleted) == ((), (), ())


@pytest.mark.parametrize(("before", "after"), [("1.3", "1.2"), ("1.2", "1.3")])
def test_changing_the_minimum_tls_version_deploys_the_api_again(before, after):
    """API Gateway applies a changed security policy with the API's next
    deployment only ("How to change a security policy": redeploy the API), and
    SAM made no new deployment, as the definition it generates did not change:
    the old policy stayed in force while the update reported success."""
    described = change("MinimumTlsVersion", before, after)
    assert "Api" in described.updated
    assert "ApiDeployment" in described.replaced


@pytest.mark.parametrize(
    "parameter", ["CallerOrganizationId", "CallerAccounts", "EndpointType", "VpcEndpointIds"]
)
def test_a_change_of_who_may_call_updates_the_api_in_place_and_deploys_it_again(parameter):
    """The API's resource policy applies with its next deployment (API
    Gateway developer guide, "Create and attach an API Gateway resource
    policy to an API"), and the SAM transform makes one when the definition
    it writes the policy into changes. A RestApi has no create-only
    property: a change of endpoint type updates it, its id and URL kept."""
    assert parameter_changes.create_only("AWS::ApiGateway::RestApi") == ()
    for each in (c for c in changes() if c.parameter == parameter):
        assert "Api" in each.updated, each
        assert "ApiDeployment" in each.replaced, each
        assert each.held(each.replaced) == each.held(each.deleted) == (), each


def test_a_private_api_is_made_and_unmade_with_its_endpoints():
    """A template rule refuses a private API without VpcEndpointIds and
    endpoints without a private API: the change of one is the other's too."""
    to_private, to_regional = (
        change("EndpointType", *values) for values in (("REGIONAL", "PRIVATE"), ("PRIVATE", "REGIONAL"))
    )
    assert to_private.along == (("VpcEndpointIds", "", parameter_changes.ENDPOINTS["VpcEndpointIds"]),)
    assert to_regional.along == (("VpcEndpointIds", parameter_changes.ENDPOINTS["VpcEndpointIds"], ""),)
    for values in (("REGIONAL", {}), ("PRIVATE", {})):
        stack = parameter_changes.values_of("EndpointType", values[0], values[1])
        assert Template(parameter_overrides=stack).refusals() == [], stack


@pytest.mark.parametrize("case", CASES, ids=CHANGE_IDS)
def test_every_change_to_the_api_is_deployed(case):
    """API Gateway serves a stage from a deployment, a snapshot of the API:
    a change that updates the REST API (its definition, its security policy,
    its endpoint) reaches callers only with a new deployment."""
    described = described_change(case)
    if "Api" in described.updated or "Api" in described.replaced:
        assert "ApiDeployment" in described.replaced, described


def test_the_reading_tells_an_update_from_a_replacement():
    """Guards the reading itself: the stage's name is create-only (a new
    stage), the throttling is not (the same stage, updated)."""
    renamed = change("StageName", "v1", "v2")
    assert "Apiv1Stage" in renamed.replaced
    throttled = change("ThrottlingRateLimit", "500", "400")
    assert (throttled.updated, throttled.replaced) == (("Apiv1Stage",), ())
    domain = change("CustomDomainName", "ids.example.com", "api.example.com", parameter_changes.DOMAIN)
    # The mapping names the domain in a create-only property: replaced with it.
    assert set(domain.replaced) == {"ApiDomain", "ApiBasePathMapping"}


def _table_rows() -> dict[str, list[list[str]]]:
    text = DEPLOY.read_text()
    block = text.split("<!-- generated: parameter-changes (python -m scripts.docs_tables) -->\n", 1)[1]
    block = block.split("<!-- end generated: parameter-changes -->", 1)[0]
    rows: dict[str, list[list[str]]] = {}
    for line in block.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found = re.fullmatch(r"`(\w+)`", cells[0])
        if found and len(cells) == 6:
            rows.setdefault(found[1], []).append(cells)
    return rows


def test_the_deploy_page_lists_what_each_parameter_replaces_and_deletes():
    """docs/deploy.md's table is generated from these changes
    (tests/infra/test_docs_tables.py holds it to them); read back, it names
    every held resource a change replaces or deletes, and says why."""
    rows = _table_rows()
    assert set(rows) == set(Template().parameters)
    text = DEPLOY.read_text()
    for each in changes():
        for logical_id in (*each.held(each.replaced), *each.held(each.deleted)):
            column = 3 if logical_id in each.replaced else 5
            assert any(f"`{logical_id}`" in row[column] for row in rows[each.parameter]), (
                each.parameter,
                logical_id,
            )
            assert f"- `{each.parameter}`, `{logical_id}`: " in text


def test_a_parameter_that_lists_its_values_is_changed_to_each():
    described = {after for _, _, after in changes_of("LogLevel")}
    assert described == {"DEBUG", "WARNING", "ERROR"}


def test_the_published_template_says_which_changes_it_does_not_deploy():
    """Without the language extensions, SAM hashes the definition with the
    Fn::If still in it: the template the Serverless Application Repository
    publishes makes no new deployment when MinimumTlsVersion or
    DisableExecuteApiEndpoint changes. docs/nested-application.md says so,
    and how to deploy by hand; should SAM start to, this fails."""
    from tests.support.sam import translate_sar

    def deployment(**values: str) -> list[str]:
        resources = translate_sar(**values)["Resources"]
        return [k for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::Deployment"]

    assert deployment(MinimumTlsVersion="1.3") == deployment(MinimumTlsVersion="1.2")
    domain = {
        "CustomDomainName": "ids.example.com",
        "CustomDomainCertificateArn": parameter_changes.CERTIFICATE,
    }
    assert deployment(**domain) == deployment(**domain, DisableExecuteApiEndpoint="false")
    page = " ".join((ROOT / "docs" / "nested-application.md").read_text().split())
    assert "`MinimumTlsVersion` or `DisableExecuteApiEndpoint` changes" in page
    assert "aws apigateway create-deployment" in page
