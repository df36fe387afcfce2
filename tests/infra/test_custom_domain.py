"""The optional custom domain (template.yaml): off by default, and with a
domain name, a regional domain that takes TLS 1.3 only by default, whose base path
maps to the API's stage, the default execute-api endpoint then switched
off. The functions never read the path (tests/unit/test_api_edge.py sends
every route with a base path in it), so the mapping is all it takes. The
TLS policy, on the domain and the API alike, is MinimumTlsVersion's.
`make lint` and `make security` check the template as it deploys by
default; here cfn-lint checks it with the domain on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localrun.template import ROOT, Template
from tests.support.sam import translate

DOMAIN = {
    "CustomDomainName": "ids.example.com",
    "CustomDomainCertificateArn": (
        "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    ),
}
DOMAIN_RESOURCES = ("ApiDomain", "ApiBasePathMapping")


def test_the_domain_is_off_by_default():
    template = Template()
    assert not template.condition("HasCustomDomain")
    for logical_id in DOMAIN_RESOURCES:
        assert template.resources[logical_id]["Condition"] == "HasCustomDomain"
    assert template.raw["Outputs"]["CustomDomainUrl"]["Condition"] == "HasCustomDomain"


@pytest.mark.parametrize(("base_path", "mapped"), [("v1", True), ("", False)])
def test_a_domain_maps_its_base_path_to_the_stage(base_path, mapped):
    template = Template(parameter_overrides=DOMAIN | {"CustomDomainBasePath": base_path})
    assert template.condition("HasCustomDomain")
    assert template.condition("HasCustomBasePath") is mapped
    domain = template.resources["ApiDomain"]["Properties"]
    assert domain["EndpointConfiguration"]["Types"] == ["REGIONAL"]
    assert domain["RegionalCertificateArn"] == {"Ref": "CustomDomainCertificateArn"}
    mapping = template.resources["ApiBasePathMapping"]["Properties"]
    assert (mapping["RestApiId"], mapping["Stage"]) == ({"Ref": "Api"}, {"Ref": "Api.Stage"})
    assert mapping["BasePath"]["Fn::If"][0] == "HasCustomBasePath"


# MinimumTlsVersion -> the enhanced policy the API and the domain take
# (API Gateway developer guide, "Supported security policies"): 1.3, TLS 1.3
# only; 1.2, TLS 1.3 and TLS 1.2 with ECDHE and AES-GCM suites only, for
# clients without TLS 1.3. Both are policies of regional (and private) APIs
# and domains; an edge-optimized API or domain takes only the *_EDGE ones,
# and a REST API left without an endpoint type is edge-optimized.
POLICIES = {
    "1.3": "SecurityPolicy_TLS13_1_3_2025_09",
    "1.2": "SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09",
}
POLICY_ENDPOINT_TYPES = {policy: frozenset({"REGIONAL", "PRIVATE"}) for policy in POLICIES.values()}
TLS = [{}, {"MinimumTlsVersion": "1.3"}, {"MinimumTlsVersion": "1.2"}]
TLS_IDS = ["default", "1.3", "1.2"]


def policy_of(parameters: dict[str, str]) -> str:
    return POLICIES[parameters.get("MinimumTlsVersion", "1.3")]


@pytest.mark.parametrize("tls", TLS, ids=TLS_IDS)
@pytest.mark.parametrize("domain", [{}, DOMAIN], ids=["no domain", "domain"])
def test_the_api_and_the_domain_take_the_policy_minimum_tls_version_picks(domain, tls):
    """TLS 1.3 only by default, on the domain and on the API's own endpoint
    (API Gateway negotiates with the API's policy even through the domain),
    in STRICT access mode (a request whose SNI names another host is
    refused). TLS 1.3 only left clients without it (Windows Server 2019,
    Java 8, OpenSSL 1.0.2) no way in; MinimumTlsVersion 1.2 takes them, with
    forward-secret AES-GCM suites only."""
    resources = translate(**domain, **tls)["Resources"]
    api = resources["Api"]["Properties"]
    assert (api["SecurityPolicy"], api["EndpointAccessMode"]) == (policy_of(tls), "STRICT")
    if domain:
        props = resources["ApiDomain"]["Properties"]
        assert (props["SecurityPolicy"], props["EndpointAccessMode"]) == (policy_of(tls), "STRICT")


def test_tls_1_3_only_is_the_default():
    template = Template()
    assert template.parameters["MinimumTlsVersion"] == "1.3"
    assert set(template.raw["Parameters"]["MinimumTlsVersion"]["AllowedValues"]) == set(POLICIES)


def test_each_policy_is_one_api_gateway_has():
    """A policy's name as API Gateway's own model spells it (botocore's
    apigateway model): a misspelt one fails here, not at deploy."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("apigateway")
    assert set(POLICIES.values()) <= set(model.shape_for("SecurityPolicy").enum)
    assert "STRICT" in model.shape_for("EndpointAccessMode").enum


@pytest.mark.parametrize("tls", TLS, ids=TLS_IDS)
@pytest.mark.parametrize("domain", [{}, DOMAIN], ids=["no domain", "domain"])
def test_the_api_and_the_domain_are_of_an_endpoint_type_their_policy_applies_to(domain, tls):
    """An API with no endpoint type is edge-optimized, which refuses the
    regional enhanced policies: the stack would fail to deploy."""
    resources = translate(**domain, **tls)["Resources"]
    api = resources["Api"]["Properties"]
    assert api["EndpointConfiguration"]["Types"] == ["REGIONAL"]
    assert set(api["EndpointConfiguration"]["Types"]) <= POLICY_ENDPOINT_TYPES[api["SecurityPolicy"]]
    if domain:
        props = resources["ApiDomain"]["Properties"]
        assert props["EndpointConfiguration"]["Types"] == api["EndpointConfiguration"]["Types"]


@pytest.mark.parametrize(
    ("parameters", "disabled"),
    [
        ({}, False),
        ({"DisableExecuteApiEndpoint": "true"}, False),  # without a domain it is the only way in
        (DOMAIN, True),
        (DOMAIN | {"DisableExecuteApiEndpoint": "false"}, False),
    ],
)
def test_with_a_domain_the_default_endpoint_is_switched_off(parameters, disabled):
    """With a domain, the execute-api endpoint stayed open beside it. Now it
    is off unless DisableExecuteApiEndpoint says false, and ApiUrl is the
    domain's URL."""
    cfn = translate(**parameters)
    body = cfn["Resources"]["Api"]["Properties"]["Body"]
    assert body["x-amazon-apigateway-endpoint-configuration"]["disableExecuteApiEndpoint"] is disabled
    url = cfn["Outputs"]["ApiUrl"]["Value"]
    assert ("ids.example.com" in str(url)) is disabled
    assert ("execute-api" in str(url)) is not disabled


def test_the_template_with_a_domain_lints_clean(tmp_path):
    text = (ROOT / "template.yaml").read_text()
    for name, value in DOMAIN.items():
        default = f'  {name}:\n    Type: String\n    Default: ""'
        assert text.count(default) == 1, name
        text = text.replace(default, f'  {name}:\n    Type: String\n    Default: "{value}"')
    (tmp_path / "template.yaml").write_text(text)
    assert Template(tmp_path / "template.yaml").condition("HasCustomDomain")
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), str(tmp_path / "template.yaml")],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("tls", TLS, ids=TLS_IDS)
def test_the_policy_is_set_as_the_rest_apis_properties_not_in_its_body(tls):
    """What docs/deploy.md ("TLS") says SAM does and leaves unverified: the
    policy and access mode are the RestApi's properties, and the OpenAPI
    body SAM generates carries neither extension. A SAM that starts putting
    them in the body fails here, and the page is to be read again."""
    api = translate(**tls)["Resources"]["Api"]["Properties"]
    assert api["SecurityPolicy"] == policy_of(tls)
    assert not {"x-amazon-apigateway-security-policy", "x-amazon-apigateway-endpoint-access-mode"} & set(
        api["Body"]
    )
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert "x-amazon-apigateway-security-policy" in deploy
