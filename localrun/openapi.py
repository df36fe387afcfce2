"""The OpenAPI document of the whole API, built from the routes each function
declares (idblocks_core.api) and the error catalogue of
idblocks_core.domain.errors, and that catalogue as docs/errors.md's table:
scripts/openapi.py prints them, the dev server serves the document.

Development time only: the pydantic models below, which no function imports,
describe the response bodies."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from localrun.invoke import load_module
from localrun.template import ROOT, default_template

# The layer's package, importable as the functions import it.
if str(ROOT / "layers" / "core") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "core"))

from idblocks_core.domain.errors import ERROR_CODES

DESCRIPTION = """\
Unique, increasing IDs from DynamoDB counters. `next` hands out one ID; `batch`
hands out a block [start, end] for the client to use locally. IDs of a counter
are never handed out twice, including after the counter is deleted and created
again. Send `Idempotency-Key` to make next and batch safe to retry.

next and batch authenticate as the deployment's ClientAuth parameter says
(SigV4, API key or none); the admin routes always need SigV4 (AWS_IAM). The
servers are a deployed stage, a custom domain and the dev server; a deployed
stage's path starts with the stage.

Integers are JSON Schema's: a number with a zero fraction (5.0, 1e2) is the
integer it equals. A body gives each key once: a key given twice is refused.
next takes no body (an empty one, null or {} are taken too).

Every error is `{"error": {"code", "message"}}` with `Cache-Control: no-store`;
`code` is one of ErrorCode's values, and a client must accept others too (a
code added later). Each error response lists the codes it can carry in
`x-error-codes`; the document's own `x-error-codes` is the whole catalogue
(docs/errors.md): each code's status, meaning, whether a retry can help, and
what to do."""

# The API's version (info.version): the project's one version (docs/compatibility.md).
API_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
LICENSE = {"name": "Apache-2.0", "identifier": "Apache-2.0"}
JSON = "application/json"
INT64_MAX = 2**63 - 1
TAGS = {
    "ids": "Hand out IDs, one (next) or a block (batch). Authenticated as the deployment's ClientAuth says.",
    "admin": "Create, list, read, move forward and delete counters. Always SigV4 (AWS_IAM).",
}
SECURITY_SCHEMES = {
    # As API Gateway itself describes AWS_IAM when it exports an API.
    "sigv4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "x-amazon-apigateway-authtype": "awsSigv4",
        "description": "AWS Signature Version 4 (AWS_IAM), not a static key: each request is signed with the "
        "caller's IAM credentials for the service `execute-api` in the stack's region, over its method, path "
        "(the stage included), query, headers and a hash of its body, and carries `Authorization`, "
        "`X-Amz-Date` and, with temporary credentials, `X-Amz-Security-Token`. An AWS SDK's SigV4 signer "
        "does it (the shipped clients' IamAuth; docs/other-languages.md for a generated client). The "
        "caller's IAM policy must allow execute-api:Invoke on the route.",
    },
    "api_key": {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": "ClientAuth API_KEY: a key of the stack's usage plan.",
    },
}
# Any route may be sent a bad body, and every one reads or writes DynamoDB.
ALWAYS_ERRORS = (
    "payload_too_large",
    "unsupported_media_type",
    "invalid_json",
    "invalid_body",
    "service_unavailable",
)
ANSWERED_BY = {"function": "the function", "gateway": "API Gateway", "both": "API Gateway or the function"}


def gateway_codes_sending(header: str) -> set[str]:
    """The codes of template.yaml's gateway responses that set ``header``."""
    responses = default_template().raw["Resources"]["Api"]["Properties"]["GatewayResponses"]
    return {
        json.loads(response["ResponseTemplates"][JSON].replace("$context.error.messageString", '""'))[
            "error"
        ]["code"]
        for response in responses.values()
        if header in response.get("ResponseParameters", {}).get("Headers", {})
    }


# The headers an error response carries, by the codes that send them.
RESPONSE_HEADERS = {
    "Retry-After": (
        {
            "description": "Seconds to wait before sending the same request again (with the same "
            "Idempotency-Key). With quota_exceeded, a pause between tries: the quota stays spent until "
            "its day is over.",
            "schema": {"type": "integer", "minimum": 0},
        },
        {code for code, entry in ERROR_CODES.items() if entry.retry == "after Retry-After"}
        | gateway_codes_sending("Retry-After"),
    ),
    "Allow": (
        {"description": "The method the route takes on this deployment: POST.", "schema": {"type": "string"}},
        {"method_not_allowed"},
    ),
}

# Every code the catalogue has today. A field of this type is declared
# `ErrorCode | str`: a client generated now keeps working when a code is added.
ErrorCode = StrEnum("ErrorCode", {code: code for code in ERROR_CODES})
ErrorCode.__doc__ = "The error codes the API answers today (docs/errors.md); more may be added."


class NextResult(BaseModel):
    counter: str
    id: int


class BatchResult(BaseModel):
    counter: str
    start: int = Field(description="First ID of the block.")
    end: int = Field(description="Last ID of the block (inclusive).")
    count: int
    step: int = Field(
        description="The deployment's RegionCount: the IDs are start + j * step for j from 0 to count - 1 "
        "(end included). 1 in a single region, where they are consecutive."
    )


class CounterState(BaseModel):
    name: str
    next: int | None = Field(
        description="The next ID this counter will hand out; null once it is exhausted (no ID is left)."
    )
    exhausted: bool = Field(
        description="True when the counter has handed out its max (or was set to max + 1): "
        "next and batch answer counter_exhausted."
    )
    max: int = Field(description="The last ID this counter may hand out.")
    step: int = Field(description="The RegionCount the counter was created with (1: a single region).")
    residue: int = Field(
        description="The RegionIndex it was created with: every ID it hands out is residue modulo step."
    )
    cache: int = Field(
        description="The most IDs each function environment takes at a time for next (1: uncached)."
    )
    created_at: datetime = Field(description="When the counter was created (UTC).")
    updated_at: datetime = Field(description="When the counter last changed (UTC).")
    deleted: Literal[True] | None = Field(
        default=None,
        description="Present, and true, on a deleted counter only (listed with deleted=true, or raised by "
        "PUT): it hands out nothing, and its next is one past the high-water mark it keeps, where a "
        "re-creation continues.",
    )


class CounterPage(BaseModel):
    counters: list[CounterState]
    cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
    deleted: Literal[True] | None = Field(
        default=None,
        description="Present, and true, when the page was asked for with deleted=true: it lists deleted "
        "counters too. A service that lists live counters alone leaves it out.",
    )


class ErrorDetail(BaseModel):
    code: ErrorCode | str = Field(
        description="Stable machine-readable code, e.g. counter_exhausted: one of ErrorCode's values, or a "
        "code added after this document."
    )
    message: str = Field(description="What is wrong, for a human.")


class ErrorBody(BaseModel):
    error: ErrorDetail


RESPONSE_MODELS = (NextResult, BatchResult, CounterState, CounterPage, ErrorBody)


def document() -> dict:
    """The document for the functions as os.environ configures them: GET next
    is off under AllowGetNext=false."""
    template = default_template()
    get_next_off = os.environ.get("ALLOW_GET_NEXT", "true") == "false"
    _, definitions = models_json_schema(
        [(model, "serialization") for model in RESPONSE_MODELS], ref_template="#/components/schemas/{model}"
    )
    schemas = definitions["$defs"]
    paths: dict[str, dict[str, Any]] = {}
    for logical_id in sorted(template.functions):
        for route in load_module(template.functions[logical_id]).routes.values():
            if get_next_off and (route.method, route.resource) == ("GET", "/counters/{name}/next"):
                continue
            operation: dict[str, Any] = {
                "operationId": route.operation_id or route.handler.__name__,
                "tags": [route.tag],
                "summary": route.summary,
                "security": route.security,
                "responses": _responses(route),
            }
            parameters = [
                {"description": f.description, "in": f.where, "name": f.name, "required": f.required}
                | {"schema": _schema(f, template.parameters)}
                for f in route.fields
                if f.where != "body"
            ]
            if parameters:
                operation["parameters"] = parameters
            # A route without body fields declares no body: generators then send none.
            if route.body is not None:
                schemas[route.body] = _body_schema(route, template.parameters)
                ref = {"$ref": f"#/components/schemas/{route.body}"}
                operation["requestBody"] = {"content": {JSON: {"schema": ref}}, "required": True}
            paths.setdefault(route.resource, {})[route.method.lower()] = operation
    return _integers_as_int64(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "idblocks",
                "version": API_VERSION,
                "description": DESCRIPTION,
                "license": LICENSE,
            },
            "servers": _servers(template.parameters),
            "tags": [{"name": name, "description": description} for name, description in TAGS.items()],
            "paths": paths,
            "components": {"schemas": dict(sorted(schemas.items())), "securitySchemes": SECURITY_SCHEMES},
            "x-error-codes": {
                code: {"status": e.status, "meaning": e.meaning, "retry": e.retry, "action": e.action}
                | {"answered_by": ANSWERED_BY[e.source]}
                for code, e in ERROR_CODES.items()
            },
        }
    )


def _servers(parameters: dict[str, str]) -> list[dict[str, Any]]:
    """Where the API is, as the stack's outputs say (ApiUrl, CustomDomainUrl),
    with the template's defaults; and the dev server."""
    return [
        {
            "url": "https://{api_id}.execute-api.{region}.amazonaws.com/{stage}",
            "description": "A deployed stack's stage: its ApiUrl output.",
            "variables": {
                "api_id": {
                    "default": "abcde12345",
                    "description": "The REST API's id, ApiUrl's first label.",
                },
                "region": {"default": "us-east-1", "description": "The stack's region."},
                "stage": {"default": parameters["StageName"], "description": "The stack's StageName."},
            },
        },
        {
            "url": "https://{domain}{base_path}",
            "description": "A deployed stack's custom domain: its CustomDomainUrl output.",
            "variables": {
                "domain": {"default": "ids.example.com", "description": "The stack's CustomDomainName."},
                "base_path": {
                    "default": "/" + parameters["CustomDomainBasePath"],
                    "description": "/ and the stack's CustomDomainBasePath; empty if that is empty.",
                },
            },
        },
        {"url": "http://127.0.0.1:3000", "description": "The dev server (make dev)."},
    ]


def _integers_as_int64(node: Any) -> Any:
    """Every integer schema of ``node`` with format int64 (IDs go up to 2^63-1),
    so that a generator picks a 64-bit type. A range beyond it would leave a
    generator a 32-bit field or none: refused."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            bounds = [node[key] for key in ("minimum", "maximum") if key in node]
            if not all(-(INT64_MAX + 1) <= bound <= INT64_MAX for bound in bounds):
                raise ValueError(f"an integer beyond int64 cannot be documented as one: {node}")
            node.setdefault("format", "int64")
        for value in node.values():
            _integers_as_int64(value)
    elif isinstance(node, list):
        for value in node:
            _integers_as_int64(value)
    return node


def _schema(spec: Any, parameters: dict[str, str]) -> dict[str, Any]:
    """A field's schema as shown: its maximum from the template's default where
    the deployment sets it; an optional field without a default may be null
    (the use case then takes its default). A body field's default is said in
    its description alone: generators (openapi-typescript among them) make a
    property with a default a required one, and a caller need not send it."""
    schema = spec.schema | ({"maximum": int(parameters[spec.maximum_from])} if spec.maximum_from else {})
    if spec.default is not None and spec.where != "body":
        schema |= {"default": spec.default}
    elif not spec.required:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema | {"description": spec.description, "title": spec.name.title()}


def _body_schema(route: Any, parameters: dict[str, str]) -> dict:
    fields = [spec for spec in route.fields if spec.where == "body"]
    schema: dict[str, Any] = {
        "additionalProperties": False,
        "properties": {spec.name: _schema(spec, parameters) for spec in fields},
        "title": route.body,
        "type": "object",
    }
    if required := [spec.name for spec in fields if spec.required]:
        schema["required"] = required
    if route.one_of:
        # One object with every field, so that a generator builds one model
        # that can send them together: at least one given, and not null ({}
        # or all nulls is refused).
        schema["minProperties"] = 1
        schema["not"] = {"properties": {name: {"type": "null"} for name in route.one_of}}
        schema["description"] = f"Give {' or '.join(route.one_of)} or both; at least one, not null."
    return schema


def _responses(route: Any) -> dict[str, Any]:
    """The success and every error the operation can answer, grouped by status
    with what each code means (``x-error-codes`` lists them for machines); API
    Gateway's own answers (template.yaml's GatewayResponses) are included."""
    status, success, *errors = route.answers
    responses: dict[str, Any] = {str(status): {"description": "Success."}}
    if success is not None:
        responses[str(status)]["content"] = {JSON: {"schema": {"$ref": f"#/components/schemas/{success}"}}}
    gateway = [entry.code for entry in ERROR_CODES.values() if entry.source in ("gateway", "both")]
    by_status: dict[str, list[str]] = {}
    for code in dict.fromkeys([*(f.code for f in route.fields), *errors, *ALWAYS_ERRORS, *gateway]):
        if isinstance(ERROR_CODES[code].status, int):
            by_status.setdefault(str(ERROR_CODES[code].status), []).append(code)
    for error_status, listed in sorted(by_status.items()):
        responses[error_status] = {
            "content": {JSON: {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            "description": "\n".join(f"- `{code}`: {ERROR_CODES[code].meaning}" for code in listed),
            "x-error-codes": listed,
        }
        if headers := {name: spec for name, (spec, codes) in RESPONSE_HEADERS.items() if codes & set(listed)}:
            responses[error_status]["headers"] = headers
    return responses


def errors_table() -> str:
    """The catalogue as the Markdown table of docs/errors.md."""
    answered_by = {"function": "function", "gateway": "API Gateway", "both": "both"}
    rows = [
        "| code | status | answered by | retry helps? | meaning | what to do |",
        "|---|---|---|---|---|---|",
        *(
            f"| `{e.code}` | {e.status} | {answered_by[e.source]} | {e.retry} | {e.meaning} | {e.action} |"
            for e in sorted(ERROR_CODES.values(), key=lambda e: (str(e.status), e.code))
        ),
    ]
    return "\n".join(rows) + "\n"
