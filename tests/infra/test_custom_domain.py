"""The optional custom domain (template.yaml): off by default, and with a
domain name, a regional domain that takes TLS 1.3 only, whose base path
maps to the API's stage, the default execute-api endpoint then switched
off. The functions never read the path (tests/unit/test_api_edge.py sends
every route with a base path in it), so the mapping is all it takes.
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


@pytest.mark.parametrize("domain", [{}, DOMAIN], ids=["no domain", "domain"])
def test_tls_1_3_only_on_the_domain_and_on_the_apis_own_endpoint(domain):
    """The domain took TLS_1_2, and the default endpoint beside it TLS 1.0
    (a REST API's default before its own policy could be set). Now both
    take the enhanced policy that accepts TLS 1.3 only, in STRICT access
    mode (a request whose SNI names another host is refused); API Gateway
    negotiates with the API's own policy even through the domain."""
    resources = translate(**domain)["Resources"]
    api = resources["Api"]["Properties"]
    policy = ("SecurityPolicy_TLS13_1_3_2025_09", "STRICT")
    assert (api["SecurityPolicy"], api["EndpointAccessMode"]) == policy
    if domain:
        props = resources["ApiDomain"]["Properties"]
        assert (props["SecurityPolicy"], props["EndpointAccessMode"]) == policy


# API Gateway's enhanced policies by endpoint type: the TLS 1.3-only
# SecurityPolicy_TLS13_1_3_2025_09 is one of the regional (and private) ones;
# an edge-optimized API or domain takes only the *_EDGE policies, and a REST
# API left without an endpoint type is edge-optimized.
POLICY_ENDPOINT_TYPES = {"SecurityPolicy_TLS13_1_3_2025_09": {"REGIONAL", "PRIVATE"}}


@pytest.mark.parametrize("domain", [{}, DOMAIN], ids=["no domain", "domain"])
def test_the_api_and_the_domain_are_of_an_endpoint_type_their_policy_applies_to(domain):
    """An API with no endpoint type is edge-optimized, which refuses the
    regional TLS 1.3 policy: the stack would fail to deploy."""
    resources = translate(**domain)["Resources"]
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
