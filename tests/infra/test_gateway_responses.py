"""Every answer API Gateway itself can give this API, as the transformed
template defines it (tests/support/sam.py): in the API's error shape, with
the headers every answer carries and a catalogued code, and a code of its
own wherever a caller must act on it otherwise than on the catch-all.

The response types are botocore's model of API Gateway's (GatewayResponseType),
so a type AWS adds fails here until it is placed. Each is one of:
- OWN: this API's features send it, and what a caller should do differs from
  request_refused or gateway_error (a retry helps, or must wait, or the
  credentials must change): it has a response and a code of its own, whose
  catalogued status is API Gateway's for it;
- GENERIC: it can be sent, and the catch-all of its class says what to do;
- ABSENT: it needs a feature the stack does not have (a custom or Cognito
  authorizer, a request validator, a non-proxy integration), which is
  checked absent from the transformed template."""

from __future__ import annotations

import botocore.session
import pytest

from idblocks_core.domain.errors import ERROR_CODES
from tests.support.gateway import DEFAULT_STATUS, effective, gateway_responses, headers_of, replayed
from tests.support.sam import translate

OWN = {
    "MISSING_AUTHENTICATION_TOKEN": "an AWS_IAM route without a signature, or an unknown route",
    "INVALID_SIGNATURE": "a SigV4 signature that does not match",
    "EXPIRED_TOKEN": "expired temporary credentials",
    "ACCESS_DENIED": "an IAM policy without execute-api:Invoke on the route",
    "INVALID_API_KEY": "ClientAuth API_KEY without a key of the usage plan",
    "THROTTLED": "the stage's, or a client key's, ThrottlingRateLimit",
    "QUOTA_EXCEEDED": "ClientAuth API_KEY with UsageQuotaPerDay: a key's quota spent for the day",
    "REQUEST_TOO_LARGE": "a body over API Gateway's payload limit",
    "INTEGRATION_TIMEOUT": "a function that does not answer within the integration timeout",
}
GENERIC = {
    "RESOURCE_NOT_FOUND": "request_refused, with API Gateway's message",
    "INTEGRATION_FAILURE": "gateway_error: the function could not be invoked",
    "API_CONFIGURATION_ERROR": "gateway_error: e.g. a function's answer API Gateway cannot read",
    "WAF_FILTERED": "request_refused: a web ACL an operator associates outside the stack",
}
ABSENT = {
    "UNAUTHORIZED": "a custom or Cognito authorizer",
    "AUTHORIZER_FAILURE": "a custom or Cognito authorizer",
    "AUTHORIZER_CONFIGURATION_ERROR": "a custom or Cognito authorizer",
    "BAD_REQUEST_PARAMETERS": "a request validator",
    "BAD_REQUEST_BODY": "a request validator",
    "UNSUPPORTED_MEDIA_TYPE": "a non-proxy integration's passthrough behaviour",
}
FALLBACKS = ("DEFAULT_4XX", "DEFAULT_5XX")
CLIENT_AUTH = [{}, {"ClientAuth": "API_KEY", "UsageQuotaPerDay": "1000"}, {"ClientAuth": "NONE"}]


def stack(parameters: dict[str, str]) -> dict:
    return translate(**parameters)


def test_every_response_type_api_gateway_has_is_placed():
    kinds = set(
        botocore.session.get_session().get_service_model("apigateway").shape_for("GatewayResponseType").enum
    )
    assert kinds == set(DEFAULT_STATUS)
    assert sorted([*OWN, *GENERIC, *ABSENT, *FALLBACKS]) == sorted(kinds)


@pytest.mark.parametrize("parameters", CLIENT_AUTH, ids=["AWS_IAM", "API_KEY", "NONE"])
@pytest.mark.parametrize("kind", sorted(set(DEFAULT_STATUS) - set(FALLBACKS)))
def test_each_answer_of_api_gateway_has_the_apis_error_shape_and_a_catalogued_code(parameters, kind):
    """Its own response or the catch-all it falls to (each catch-all is
    reached through the types that fall to it): {"error": {"code",
    "message"}} with a catalogued gateway code of the right status, never
    cached, never sniffed."""
    answered_as, response = effective(gateway_responses(stack(parameters)), kind)
    status, headers, body = replayed(kind, response)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    entry = ERROR_CODES[body["error"]["code"]]
    assert entry.source in ("gateway", "both")
    if answered_as in FALLBACKS:
        assert entry.status == answered_as[-3:].lower()
    assert str(entry.status) in (str(status), f"{str(status)[0]}xx")
    assert headers["Cache-Control"] == "no-store"
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("parameters", CLIENT_AUTH, ids=["AWS_IAM", "API_KEY", "NONE"])
@pytest.mark.parametrize("kind", sorted(OWN))
def test_an_answer_a_caller_acts_on_differently_has_a_code_of_its_own(parameters, kind):
    """A spent daily quota answered as the 4xx catch-all (or as throttled,
    whose retry helps) leaves a caller to retry all day."""
    responses = gateway_responses(stack(parameters))
    assert kind in responses, f"{kind} ({OWN[kind]}) falls to the catch-all"
    status, _, body = replayed(kind, responses[kind])
    assert ERROR_CODES[body["error"]["code"]].status == status == DEFAULT_STATUS[kind]


def test_a_spent_quota_says_a_retry_does_not_help_and_asks_for_a_long_pause():
    """Both clients retry every 429 with backoff, within a deadline (30 s by
    default); a Retry-After past it stops them at the first answer."""
    status, headers, body = replayed(
        "QUOTA_EXCEEDED", gateway_responses(stack(CLIENT_AUTH[1]))["QUOTA_EXCEEDED"]
    )
    assert (status, body["error"]["code"]) == (429, "quota_exceeded")
    assert ERROR_CODES["quota_exceeded"].retry == "no"
    assert ERROR_CODES["throttled"].retry == "yes"
    assert int(headers["Retry-After"]) > 30
    assert "quota" not in ERROR_CODES["throttled"].meaning.split("(")[0]


@pytest.mark.parametrize("parameters", CLIENT_AUTH, ids=["AWS_IAM", "API_KEY", "NONE"])
def test_the_features_the_absent_types_need_are_absent(parameters):
    cfn = stack(parameters)
    types = {resource["Type"] for resource in cfn["Resources"].values()}
    assert not types & {"AWS::ApiGateway::Authorizer", "AWS::ApiGateway::RequestValidator"}
    body = cfn["Resources"]["Api"]["Properties"]["Body"]
    schemes = body.get("securityDefinitions", {})
    assert not [name for name, scheme in schemes.items() if "x-amazon-apigateway-authorizer" in scheme]
    assert "x-amazon-apigateway-request-validators" not in body
    for operations in body["paths"].values():
        for operation in operations.values():
            assert "x-amazon-apigateway-request-validator" not in operation
            integration = operation["x-amazon-apigateway-integration"]
            assert integration["type"] == "aws_proxy"
            assert "passthroughBehavior" not in integration


def test_a_header_value_is_read_as_api_gateway_reads_it():
    assert headers_of({"responseParameters": {"gatewayresponse.header.A": "'b'"}}) == {"A": "b"}
