"""The OpenAPI document of the whole API, merged by Powertools from the three
functions' routes (each function's ``app``, idblocks_core.api.resolver.Api:
its routes, their field declarations and the pydantic models of
idblocks_core.api.schemas), with the error catalogue of
idblocks_core.domain.errors; and that catalogue as the table of
docs/errors.md. scripts/openapi.py prints them; the dev server serves the
document.

Development time only: the functions route and validate without Powertools'
Event Handler and pydantic, which cost their cold start; here each route is
declared again to a Powertools resolver, with a stand-in handler whose
signature carries the parameters' and body's types, so that Powertools
writes the document as it would for handlers written against it."""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi import params as openapi_params
from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

from localrun.invoke import load_module
from localrun.template import ROOT, default_template

# The layer's package, importable as the functions import it.
if str(ROOT / "layers" / "core") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "core"))

DESCRIPTION = """\
Unique, increasing IDs from DynamoDB counters. `next` hands out one ID; `batch`
hands out a block [start, end] for the client to use locally. IDs of a counter
are never handed out twice, including after the counter is deleted and created
again. Send `Idempotency-Key` to make next and batch safe to retry.

next and batch authenticate as the deployment's ClientAuth parameter says
(SigV4, API key or none); the admin routes always need SigV4 (AWS_IAM).

Every error is `{"error": {"code", "message"}}` with `Cache-Control: no-store`.
Each error response lists the codes it can carry in `x-error-codes`; the
document's own `x-error-codes` is the whole catalogue (docs/errors.md): each
code's status, meaning, whether a retry can help, and what to do."""


def document(environment: Mapping[str, str] | None = None) -> dict:
    """The document for functions running with ``environment`` (os.environ
    by default): GET next is off under AllowGetNext=false."""
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn

    schemes = {
        "sigv4": APIKey(
            name="Authorization", in_=APIKeyIn.header, description="AWS Signature Version 4 (AWS_IAM)"
        ),
        "api_key": APIKey(name="x-api-key", in_=APIKeyIn.header, description="API key (ClientAuth API_KEY)"),
    }
    merge = OpenAPIMerge(
        title="idblocks",
        version="1.0.0",
        description=DESCRIPTION,
        security_schemes=schemes,
        on_conflict="error",
    )
    functions = default_template().functions
    for logical_id in sorted(functions):
        app = powertools_resolver(load_module(functions[logical_id]).app)
        merge.add_schema(app.get_openapi_schema(title="idblocks", security_schemes=schemes))
    doc = tidy(json.loads(merge.get_openapi_json_schema()))
    if (os.environ if environment is None else environment).get("ALLOW_GET_NEXT", "true") == "false":
        del doc["paths"]["/counters/{name}/next"]["get"]
    return doc


def documented(status: int, model: Any, *errors: int | str) -> dict[int, dict[str, Any]]:
    """OpenAPI responses of a route: its success and the error codes it can
    answer with, grouped by status, each status listing its codes and what
    they mean (``x-error-codes`` holds them for machines). A bare status
    stands for every code of the catalogue with that status."""
    from idblocks_core.api.resolver import _ALWAYS
    from idblocks_core.api.schemas import ErrorBody
    from idblocks_core.domain.errors import ERROR_CODES

    success: dict[str, Any] = {"description": "Success."}
    if model is not None:
        success["content"] = {JSON: {"model": model}}
    responses: dict[int, dict[str, Any]] = {status: success}
    codes: dict[int, list[str]] = {}
    for error in (*errors, *_ALWAYS):
        chosen = (
            [e.code for e in ERROR_CODES.values() if e.status == error and e.source != "gateway"]
            if isinstance(error, int)
            else [error]
        )
        for code in chosen:
            listed = codes.setdefault(ERROR_CODES[code].status, [])  # type: ignore[arg-type]
            if code not in listed:
                listed.append(code)
    for error_status, listed in sorted(codes.items()):
        responses[error_status] = {
            "description": "\n".join(f"- `{code}`: {ERROR_CODES[code].meaning}" for code in listed),
            "content": {JSON: {"model": ErrorBody}},
            "x-error-codes": listed,
        }
    return responses


JSON = "application/json"
_PARAM_TYPES = {"path": openapi_params.Path, "query": openapi_params.Query, "header": openapi_params.Header}
_KINDS: dict[str, Any] = {"text": str, "int": int}


def _parameter(spec: Any) -> inspect.Parameter:
    """A handler argument as Powertools reads one: the type, and the
    parameter's place and schema in Annotated."""
    kind = _KINDS[spec.kind]
    optional = not spec.required and spec.default is None
    annotation = Annotated[kind | None if optional else kind, _PARAM_TYPES[spec.where](**spec.doc)]
    default = inspect.Parameter.empty if spec.required else spec.default
    return inspect.Parameter(
        spec.argument, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation
    )


def _stand_in(route: Any) -> Any:
    """A function with the route handler's name (Powertools derives the
    operationId from it) and the signature Powertools documents."""
    from idblocks_core.api import schemas

    def handler(**_: Any) -> None:  # never called: only documented
        raise NotImplementedError

    parameters = [_parameter(spec) for spec in route.params if spec.required]
    if route.body is not None:
        model = schemas.REQUEST_MODELS[route.body]
        parameters.append(
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)
        )
    parameters += [_parameter(spec) for spec in route.params if not spec.required]
    success = route.responses[1]
    returns = Response[getattr(schemas, success)] if success else Response[None]
    handler.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    handler.__name__ = handler.__qualname__ = route.handler.__name__
    return handler


def powertools_resolver(api: Any) -> APIGatewayRestResolver:
    """A Powertools resolver declaring ``api``'s routes (one registration per
    handler, with all its methods, as they were written for Powertools)."""
    from idblocks_core.api import schemas

    resolver = APIGatewayRestResolver(enable_validation=True)
    by_handler: dict[Any, list[Any]] = {}
    for route in api.routes:
        by_handler.setdefault(route.handler, []).append(route)
    for routes in by_handler.values():
        route = routes[0]
        status, model, *errors = route.responses
        resolver.route(
            route.rule,
            method=[r.method for r in routes],
            summary=route.summary,
            responses=documented(status, getattr(schemas, model) if model else None, *errors),
            security=route.security,
        )(_stand_in(route))
    return resolver


def catalogue() -> dict[str, dict[str, object]]:
    from idblocks_core.domain.errors import ERROR_CODES

    return {
        code: {
            "status": entry.status,
            "meaning": entry.meaning,
            "retry": entry.retry,
            "action": entry.action,
            "answered_by": "API Gateway" if entry.source == "gateway" else "the function",
        }
        | ({"answered_by": "API Gateway or the function"} if entry.source == "both" else {})
        for code, entry in ERROR_CODES.items()
    }


def gateway_responses() -> dict[str, list[str]]:
    """Status -> the codes API Gateway itself may answer any operation with
    (its 4xx/5xx catch-alls have no one status and stay in the catalogue)."""
    from idblocks_core.domain.errors import ERROR_CODES

    by_status: dict[str, list[str]] = {}
    for entry in ERROR_CODES.values():
        if entry.source in ("gateway", "both") and isinstance(entry.status, int):
            by_status.setdefault(str(entry.status), []).append(entry.code)
    return by_status


def tidy(doc: dict) -> dict:
    """Say only what the API does. Powertools documents a 422 with its own
    validation-error body on every validated route; this API answers bad
    input with 400 and its own error body instead (idblocks_core.api.resolver). A 204
    has no body. API Gateway's own answers (template.yaml's GatewayResponses)
    are added to every operation. Schemas nothing refers to any more are
    dropped."""
    from idblocks_core.domain.errors import ERROR_CODES

    gateway = gateway_responses()
    for operations in doc["paths"].values():
        for operation in operations.values():
            responses = operation["responses"]
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
            if "204" in responses:
                responses["204"].pop("content", None)
            for status, codes in gateway.items():
                response = responses.setdefault(
                    status,
                    {
                        "description": "",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                        },
                        "x-error-codes": [],
                    },
                )
                added = [code for code in codes if code not in response["x-error-codes"]]
                response["x-error-codes"] += added
                lines = [f"- `{code}`: {ERROR_CODES[code].meaning}" for code in added]
                response["description"] = "\n".join(filter(None, [response["description"], *lines]))
    doc["x-error-codes"] = catalogue()
    schemas = doc["components"]["schemas"]
    used: set[str] = set()
    pending = [json.dumps(doc["paths"])]
    while pending:
        for name in re.findall(r"#/components/schemas/(\w+)", pending.pop()):
            if name not in used:
                used.add(name)
                pending.append(json.dumps(schemas[name]))
    doc["components"]["schemas"] = {name: schemas[name] for name in sorted(used)}
    return doc


def errors_table() -> str:
    """The catalogue as the Markdown table of docs/errors.md."""
    from idblocks_core.domain.errors import ERROR_CODES

    answered_by = {"function": "function", "gateway": "API Gateway", "both": "both"}
    rows = [
        "| code | status | answered by | retry helps? | meaning | what to do |",
        "|---|---|---|---|---|---|",
    ]
    for entry in sorted(ERROR_CODES.values(), key=lambda e: (str(e.status), e.code)):
        rows.append(
            f"| `{entry.code}` | {entry.status} | {answered_by[entry.source]} | {entry.retry} "
            f"| {entry.meaning} | {entry.action} |"
        )
    return "\n".join(rows) + "\n"
