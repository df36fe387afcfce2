"""What the three handlers share about HTTP: the resolver they are built on,
the body limit and parser, the one mapping from exceptions to status codes,
the error body and the caller's identity.

Every response carries ``Cache-Control: no-store``: an ID served from a cache
is an ID handed out twice.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from pydantic import BaseModel
from pydantic_core import from_json

from idblocks_core.api.schemas import ErrorBody
from idblocks_core.core import core
from idblocks_core.domain.errors import ERROR_CODES, IdBlocksError, InvalidInput
from idblocks_core.domain.rules import (
    IDEMPOTENCY_KEY_PATTERN,
    LIMIT_MAX_ID,
    LIST_LIMIT_MAX,
    NAME_PATTERN,
    check_cache,
    check_count,
    check_idempotency_key,
    check_limit,
    check_name,
    check_new_counter,
    check_next,
)
from idblocks_core.observability import logger

JSON = "application/json"
NO_STORE = {"Cache-Control": "no-store"}
UNSUPPORTED_MEDIA_TYPE = "send the request body as application/json"

# Every valid body is a few dozen bytes; anything this large is not one, and
# refusing it before parsing bounds what a request can make the parser do:
# no integer literal in a body that passes can reach CPython's (and
# pydantic-core's) 4,300-digit limit.
MAX_BODY_BYTES = 4096

CounterName = Annotated[
    str,
    Path(pattern=NAME_PATTERN, min_length=1, max_length=128, description="Counter name."),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description=(
            "Makes the request safe to retry: the same caller, counter, key and count get the "
            "identical response for the key's lifetime (IdempotencyTtlSeconds)."
        ),
    ),
]


def status_of(error: IdBlocksError) -> int:
    """The catalogue's status for the error's code; a code missing from it is
    a bug, answered as one (tests/infra/test_error_catalogue.py keeps them in step)."""
    entry = ERROR_CODES.get(error.code)
    return entry.status if entry is not None and isinstance(entry.status, int) else 500


def json_response(
    status: int, body: BaseModel | dict[str, Any] | None, headers: dict[str, str] | None = None
) -> Response:
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json")
    return Response(
        status_code=status,
        content_type=JSON if body is not None else None,
        body=body,
        headers={**NO_STORE, **(headers or {})},
    )


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response(status, error_body(code, message), headers)


# Every operation can be sent a body that is not JSON (see resolve()), and
# every one reads or writes DynamoDB.
_ALWAYS = ("unsupported_media_type", "service_unavailable")
# What a route with a JSON body can answer about the body as a whole.
BODY_ERRORS = ("payload_too_large", "invalid_json", "invalid_body")
# What next and batch can answer from the allocation use case.
ALLOCATION_ERRORS = (
    "invalid_name",
    "invalid_idempotency_key",
    "counter_not_found",
    "counter_exhausted",
    "region_mismatch",
    "request_in_progress",
    "idempotency_key_reused",
)


def documented(status: int, model: type[BaseModel] | None, *errors: int | str) -> dict[int, dict[str, Any]]:
    """OpenAPI responses of a route: its success and the error codes it can
    answer with, grouped by status, each status listing its codes and what
    they mean (``x-error-codes`` holds them for machines). A bare status
    stands for every code of the catalogue with that status."""
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


def _on_domain_error(error: IdBlocksError) -> Response:
    status = status_of(error)
    headers = {}
    retry_after = getattr(error, "retry_after_seconds", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if status >= 500:
        cause = error.__cause__
        logger.warning(
            "request failed",
            error_code=error.code,
            error=error.message,
            cause=None if cause is None else repr(cause),
        )
    return error_response(status, error.code, error.message, headers)


def _reject_cursor(_: object) -> None:
    raise InvalidInput("invalid_cursor", "cursor is not one this API returned")


# Each field Powertools validates, and the core's check of it: a value
# Powertools refuses is refused again by the check, which words the error as
# the core words it, one voice for both ("count must be an integer from 1 to
# N"). Keys are lower-case: headers arrive in any case.
_FIELD_CHECKS: dict[str, Callable[[Any], object]] = {
    "name": check_name,
    "idempotency-key": check_idempotency_key,
    "count": lambda value: check_count(value, core().settings.max_batch_size),
    "start": lambda value: check_new_counter(value, LIMIT_MAX_ID),
    "max": lambda value: check_new_counter(None, value),
    "next": check_next,
    "cache": check_cache,
    "limit": lambda value: check_limit(value, LIST_LIMIT_MAX),
    "cursor": _reject_cursor,
}


def parse_body(text: str | bytes) -> Any:
    """The resolver's JSON parser, in place of json.loads, which raises
    RecursionError on deep nesting and ValueError on integer literals past
    CPython's int-string limit (both became 500s). pydantic-core's parser
    refuses nesting beyond its own recursion limit (about 200 levels) with a
    ValueError instead. Syntax errors stay JSONDecodeError, which Powertools
    reports as invalid JSON."""
    try:
        data = from_json(text, cache_strings=False)
    except ValueError as exc:
        reason = str(exc)
        if reason.startswith(("recursion limit exceeded", "number out of range")):
            raise InvalidInput(
                "invalid_body", "request body is nested too deeply or has too long a number"
            ) from None
        raise json.JSONDecodeError(
            reason, text if isinstance(text, str) else text.decode(errors="replace"), 0
        ) from None
    return data


def _on_validation_error(error: RequestValidationError) -> Response:
    """Powertools' validation errors, in the API's error body and the core's
    words. The first problem is reported; its code names the field."""
    problem = error.errors()[0]
    location = tuple(problem.get("loc", ()))
    kind = problem.get("type", "")
    if kind == "json_invalid":
        return error_response(400, "invalid_json", "request body is not valid JSON")
    fields = [part for part in location[1:] if isinstance(part, str)]
    if not fields:
        return error_response(400, "invalid_body", "request body must be a JSON object")
    field = fields[-1]
    if kind == "extra_forbidden":
        return error_response(400, "invalid_body", f"request body has an unknown field '{field}'")
    # A missing field reaches its check as None: only required fields can be
    # missing, and their checks refuse None.
    given = problem.get("input") if kind != "missing" else None
    check = _FIELD_CHECKS.get(field.lower())
    try:
        if check is not None:
            check(given)
    except InvalidInput as refused:
        return error_response(400, refused.code, refused.message)
    # Powertools refused what the core would take: the models and the core
    # disagree, which is a bug; still the caller's request is what is refused.
    logger.warning("validation and core disagree", field=field, problem=problem.get("msg"))
    return error_response(400, "invalid_body", f"{field} is not valid here")


def _on_unsupported_content_type(_: RequestUnsupportedContentType) -> Response:
    return error_response(415, "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE)


def _on_route_not_found(_: NotFoundError) -> Response:
    return error_response(404, "route_not_found", "no such route")


def _on_unexpected(error: Exception) -> Response:
    logger.exception("unexpected error")
    return error_response(500, "internal_error", "internal error; it has been logged")


# How API Gateway authenticates callers (template.yaml), for the OpenAPI
# document (localrun/openapi.py defines the schemes). next and batch take
# whichever the deployment's ClientAuth chose; the admin routes always SigV4.
CLIENT_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"api_key": []}, {}]
ADMIN_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}]


def new_resolver() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=parse_body)
    app.exception_handler(IdBlocksError)(_on_domain_error)
    app.exception_handler(RequestValidationError)(_on_validation_error)
    app.exception_handler(RequestUnsupportedContentType)(_on_unsupported_content_type)
    app.not_found(_on_route_not_found)
    app.exception_handler(Exception)(_on_unexpected)
    return app


def resolve(app: APIGatewayRestResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """What every handler returns: the resolver's answer, after a check the
    resolver does not make. A body that is not JSON is refused here, before
    Powertools tries to parse it as a form or a multipart message (a
    multipart type without a boundary makes it raise). Media types are
    case-insensitive; Powertools compares them as written, so they are
    lower-cased for it."""
    if event.get("body"):
        if body_size(event) > MAX_BODY_BYTES:
            return _raw_error(413, "payload_too_large", f"request body is larger than {MAX_BODY_BYTES} bytes")
        given = {k: v for k, v in (event.get("headers") or {}).items() if str(k).lower() == "content-type"}
        media_type = str(next(iter(given.values()), JSON)).split(";")[0].strip().lower()
        if media_type != JSON:
            return _raw_error(415, "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE)
        if any(value != value.lower() for value in given.values()):
            event = {**event, "headers": {**event["headers"], **{k: v.lower() for k, v in given.items()}}}
            if event.get("multiValueHeaders"):
                lowered = {
                    k: [v.lower() for v in event["multiValueHeaders"][k]]
                    for k in given
                    if k in event["multiValueHeaders"]
                }
                event["multiValueHeaders"] = {**event["multiValueHeaders"], **lowered}
    return app.resolve(event, context)


def body_size(event: dict[str, Any]) -> int:
    """The body's size in bytes as the caller sent it."""
    body = str(event["body"])
    if event.get("isBase64Encoded"):
        try:
            return len(base64.b64decode(body))
        except (binascii.Error, ValueError):
            return len(body)
    return len(body.encode(errors="surrogatepass"))


def _raw_error(status: int, code: str, message: str) -> dict[str, Any]:
    """An error answered before the resolver runs, in the proxy response format."""
    return {
        "statusCode": status,
        "multiValueHeaders": {"Content-Type": [JSON], **{k: [v] for k, v in NO_STORE.items()}},
        "body": json.dumps(error_body(code, message)),
        "isBase64Encoded": False,
    }


def caller_of(app: APIGatewayRestResolver) -> str:
    """Who is calling, as API Gateway authenticated them: the IAM principal,
    else the API key, else nobody in particular (ClientAuth NONE)."""
    identity = app.current_event.request_context.identity
    if identity.user_arn:
        return f"iam:{identity.user_arn}"
    if identity.api_key_id:
        return f"apikey:{identity.api_key_id}"
    return "anonymous"
