"""The OpenAPI document of the whole API, built from the routes each function
declares (idblocks_core.api) and the error catalogue of
idblocks_core.domain.errors, and that catalogue as docs/errors.md's table:
scripts/openapi.py prints them, the dev server serves the document.

Development time only: the pydantic models below, which no function imports,
describe the response bodies."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

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
(SigV4, API key or none); the admin routes always need SigV4 (AWS_IAM).

Integers are JSON Schema's: a number with a zero fraction (5.0, 1e2) is the
integer it equals. A body gives each key once: a key given twice is refused.

Every error is `{"error": {"code", "message"}}` with `Cache-Control: no-store`.
Each error response lists the codes it can carry in `x-error-codes`; the
document's own `x-error-codes` is the whole catalogue (docs/errors.md): each
code's status, meaning, whether a retry can help, and what to do."""

JSON = "application/json"
SECURITY_SCHEMES = {
    scheme: {"description": description, "in": "header", "name": header, "type": "apiKey"}
    for scheme, header, description in [
        ("sigv4", "Authorization", "AWS Signature Version 4 (AWS_IAM)"),
        ("api_key", "x-api-key", "API key (ClientAuth API_KEY)"),
    ]
}
# Any route may be sent a bad body, and every one reads or writes DynamoDB.
ALWAYS_ERRORS = (
    "payload_too_large",
    "unsupported_media_type",
    "invalid_json",
    "invalid_body",
    "service_unavailable",
)
NO_BODY = {"type": ["object", "null"], "maxProperties": 0, "description": "No field: none, null or {}."}
ANSWERED_BY = {"function": "the function", "gateway": "API Gateway", "both": "API Gateway or the function"}


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
        description="How many IDs each function environment takes at a time for next (1: uncached)."
    )
    created_at: str
    updated_at: str


class CounterPage(BaseModel):
    counters: list[CounterState]
    cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. counter_exhausted.")
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
            method = route.method.lower()
            operation: dict[str, Any] = {
                "operationId": re.sub(r"\W", "_", f"{route.handler.__name__}{route.resource}_{method}"),
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
            if route.body is not None:
                schemas[route.body] = _body_schema(route, template.parameters)
                ref = {"$ref": f"#/components/schemas/{route.body}"}
                operation["requestBody"] = {"content": {JSON: {"schema": ref}}, "required": True}
            elif method in ("post", "put"):
                operation["requestBody"] = {"content": {JSON: {"schema": NO_BODY}}, "required": False}
            paths.setdefault(route.resource, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "idblocks", "version": "1.0.0", "description": DESCRIPTION},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items())), "securitySchemes": SECURITY_SCHEMES},
        "x-error-codes": {
            code: {"status": e.status, "meaning": e.meaning, "retry": e.retry, "action": e.action}
            | {"answered_by": ANSWERED_BY[e.source]}
            for code, e in ERROR_CODES.items()
        },
    }


def _schema(spec: Any, parameters: dict[str, str]) -> dict[str, Any]:
    """A field's schema as shown: its maximum from the template's default where
    the deployment sets it; an optional field without a default may be null
    (the use case then takes its default)."""
    schema = spec.schema | ({"maximum": int(parameters[spec.maximum_from])} if spec.maximum_from else {})
    if spec.default is not None:
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
    if route.one_of:  # at least one of them, and not null: {} or all nulls is refused
        schema["anyOf"] = [{"required": [n], "properties": {n: {"type": "integer"}}} for n in route.one_of]
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
