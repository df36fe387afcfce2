"""API Gateway's own answers (gateway responses), as the transformed template
defines them: each response type's default status, and a response as API
Gateway would send it, to replay to a client."""

from __future__ import annotations

import json
from typing import Any

# Each response type's status when its gateway response sets none (API
# Gateway developer guide, "Gateway response types for API Gateway");
# DEFAULT_4XX and DEFAULT_5XX keep the status of the type that fell to them.
DEFAULT_STATUS: dict[str, int | str] = {
    "DEFAULT_4XX": "4xx",
    "DEFAULT_5XX": "5xx",
    "ACCESS_DENIED": 403,
    "API_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_FAILURE": 500,
    "BAD_REQUEST_PARAMETERS": 400,
    "BAD_REQUEST_BODY": 400,
    "EXPIRED_TOKEN": 403,
    "INTEGRATION_FAILURE": 504,
    "INTEGRATION_TIMEOUT": 504,
    "INVALID_API_KEY": 403,
    "INVALID_SIGNATURE": 403,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "QUOTA_EXCEEDED": 429,
    "REQUEST_TOO_LARGE": 413,
    "RESOURCE_NOT_FOUND": 404,
    "THROTTLED": 429,
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "WAF_FILTERED": 403,
}
HEADER = "gatewayresponse.header."


def gateway_responses(cfn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Response type -> its gateway response, from the RestApi's OpenAPI body
    (where SAM puts the Api's GatewayResponses)."""
    return cfn["Resources"]["Api"]["Properties"]["Body"]["x-amazon-apigateway-gateway-responses"]


def effective(responses: dict[str, dict[str, Any]], kind: str) -> tuple[str, dict[str, Any]]:
    """The gateway response API Gateway answers ``kind`` with: its own, else
    the default of its status class."""
    if kind in responses:
        return kind, responses[kind]
    fallback = "DEFAULT_5XX" if str(DEFAULT_STATUS[kind]).startswith("5") else "DEFAULT_4XX"
    return fallback, responses[fallback]


def headers_of(response: dict[str, Any]) -> dict[str, str]:
    """The static header values a gateway response sets ('value' quoted)."""
    found = {}
    for key, value in response.get("responseParameters", {}).items():
        if key.startswith(HEADER) and value.startswith("'") and value.endswith("'"):
            found[key.removeprefix(HEADER)] = value[1:-1]
    return found


def body_of(response: dict[str, Any], message: str = "API Gateway's message") -> dict[str, Any]:
    """The JSON body API Gateway renders from the response's template, with
    $context.error.messageString as the JSON string it stands for."""
    template = response["responseTemplates"]["application/json"]
    return json.loads(template.replace("$context.error.messageString", json.dumps(message)))


def replayed(kind: str, response: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
    """(status, headers, body) as API Gateway sends the response of ``kind``."""
    status = int(response.get("statusCode", DEFAULT_STATUS[kind]))
    return status, headers_of(response), body_of(response)
