"""What the three functions share about HTTP: how API Gateway's REST proxy
integration hands a request over, and how the answer goes back.

API Gateway has matched the route before a function runs and says which:
``httpMethod`` and ``resource`` pick the handler from the function's own
table, and ``pathParameters`` carry the counter name. ``path`` is never
read: behind a custom domain it carries the base path (/v1/counters/...).

Each request is read one way. Headers are one case-insensitive view of
``headers`` and ``multiValueHeaders``; a body is parsed once, and a key
given twice in it is refused (a proxy or a log line may read the first
value, json.loads keeps the last). Whether a value is valid is the domain
rules' decision (domain/rules.py), taken once, by the use case: this module
only says where each value comes from (api/fields.py), and the OpenAPI
document is built from the same declarations (localrun/openapi.py).

Every response carries ``Cache-Control: no-store``: an ID served from a cache
is an ID handed out twice.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from idblocks_core.domain.errors import ERROR_CODES, IdBlocksError, InvalidInput
from idblocks_core.observability import logger

JSON = "application/json"

# Every valid body is a few dozen bytes; anything this large is not one, and
# refusing it before parsing bounds what a request can make the parser do:
# no integer literal in a body that passes can reach CPython's 4,300-digit
# limit on reading one.
MAX_BODY_BYTES = 4096
# Nesting beyond this is refused before json.loads sees it, which would
# otherwise build it all (or raise RecursionError far deeper).
MAX_JSON_DEPTH = 200

# What every route can answer besides its fields' codes: any route may be
# sent a body (too large, not JSON, or with fields it does not take), and
# every one reads or writes DynamoDB.
ALWAYS_ERRORS = (
    "payload_too_large",
    "unsupported_media_type",
    "invalid_json",
    "invalid_body",
    "service_unavailable",
)
# What next and batch can answer from the allocation use case.
ALLOCATION_ERRORS = (
    "counter_not_found",
    "counter_exhausted",
    "region_mismatch",
    "request_in_progress",
    "idempotency_key_reused",
)
# How API Gateway authenticates callers (template.yaml): next and batch take
# whichever the deployment's ClientAuth chose; the admin routes always SigV4.
CLIENT_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"api_key": []}, {}]
ADMIN_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}]


@dataclass(frozen=True)
class Field:
    """One value a route reads: ``name`` as the request spells it (a header's
    in lower case), ``where`` it comes from (path, query, header or body),
    ``code`` the error a bad value gets (the domain's check words it), and
    ``schema`` what the OpenAPI document says it takes; ``maximum_from``
    names the template parameter whose default is the documented maximum."""

    name: str
    where: str
    code: str
    schema: dict[str, Any]
    description: str
    required: bool = False
    default: Any = None
    maximum_from: str = ""


@dataclass(frozen=True)
class Route:
    """One operation: its handler and what the OpenAPI document says of it.
    ``body`` names the body's schema (None: the route takes no body fields);
    ``answers`` is the success status, its schema's name (or None) and the
    error codes besides its fields' own; ``one_of`` lists body fields of which
    at least one must be given."""

    method: str
    resource: str
    handler: Callable[[Request], dict[str, Any]]
    summary: str
    fields: tuple[Field, ...]
    body: str | None
    answers: tuple[Any, ...]
    security: list[dict[str, list[str]]]
    one_of: tuple[str, ...] = field(default=())


class Routes:
    """The routes of one function, by (method, resource) as API Gateway names them."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], Route] = {}

    def route(self, method: str, resource: str, **declared: Any) -> Callable[[Callable], Callable]:
        def register(handler: Callable[[Request], dict[str, Any]]) -> Callable[[Request], dict[str, Any]]:
            self.table[(method, resource)] = Route(method, resource, handler, **declared)
            return handler

        return register


class Request:
    """What a handler is given: each declared value by name (None when the
    request leaves it out), and the invocation."""

    __slots__ = ("context", "event", "method", "values")

    def __init__(self, event: dict[str, Any], context: Any, method: str, values: dict[str, Any]) -> None:
        self.event = event
        self.context = context
        self.method = method
        self.values = values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def caller(self) -> str:
        return caller_of(self.event)


# -- reading a request -----------------------------------------------------------


def merged(single: dict[str, Any] | None, multi: dict[str, Any] | None, fold: Callable[[str], str]) -> dict:
    """Every value of each name, as API Gateway fills the two maps: the
    multi-value one with all of them, the other with the last; names folded
    by ``fold`` (lower case for headers)."""
    values: dict[str, list[Any]] = {}
    for name, given in (multi or {}).items():
        values.setdefault(fold(name), []).extend(given if isinstance(given, list) else [given])
    for name, given in (single or {}).items():
        values.setdefault(fold(name), [given])
    return values


def _one(values: list[Any] | None) -> Any:
    """A value given once is that value; given more than once it stays a
    list, which no check takes: ambiguous, so refused."""
    if not values:
        return None
    return values[0] if len(values) == 1 else values


# A query string or header is text; an integer is read as the OpenAPI
# document's integer: ASCII digits with single underscores between them, a
# sign, a fraction of zeros ("5.0" is 5), white space around. Anything else
# stays text, for the domain's check to refuse in its own words.
_INTEGER_TEXT = re.compile(r"\s*([+-]?[0-9](?:_?[0-9])*)(?:\.0+)?\s*")


def _integer(text: Any) -> Any:
    found = _INTEGER_TEXT.fullmatch(text) if isinstance(text, str) else None
    return int(found[1]) if found else text


def body_size(event: dict[str, Any]) -> int:
    """The body's size in bytes as the caller sent it."""
    body = str(event["body"])
    if event.get("isBase64Encoded"):
        try:
            return len(base64.b64decode(body))
        except (binascii.Error, ValueError):
            return len(body)
    return len(body.encode(errors="surrogatepass"))


def _body_text(event: dict[str, Any]) -> str | None:
    body = event.get("body")
    if body and event.get("isBase64Encoded"):
        try:
            return base64.b64decode(str(body).encode(), validate=False).decode()
        except (binascii.Error, ValueError):
            raise InvalidInput("invalid_body", "request body is not UTF-8 text") from None
    return body


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise InvalidInput("invalid_body", f"request body gives the key '{twice}' twice")
    return data


def _number(text: str) -> int | float:
    """JSON Schema's integer, which the OpenAPI document speaks, is any number
    with a zero fraction: 5.0 and 1e2 are integers. They are read exactly,
    as one (a float would round 9007199254740993.0); a number far beyond any
    ID stays a float, which no check takes."""
    from decimal import Decimal  # only bodies that carry a fraction or an exponent pay for it

    value = Decimal(text)
    if value.adjusted() <= 20 and value == value.to_integral_value():
        return int(value)
    return float(text)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


# Strings (with their escapes) are one token, so brackets inside them are text.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def _too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for token in _BRACKETS.finditer(text):
        char = token.group()[0]
        depth += 1 if char in "[{" else -1 if char in "]}" else 0
        if depth > MAX_JSON_DEPTH:
            return True
    return False


def parse_body(text: str) -> Any:
    """The body as JSON, once: nesting past MAX_JSON_DEPTH is refused before
    parsing, a key given twice at any depth is refused naming it, and lone
    surrogates (which json.loads takes and no UTF-8 text can carry) or NaN
    and Infinity are not JSON."""
    if _too_deep(text):
        raise InvalidInput("invalid_body", "request body is nested too deeply or has too long a number")
    try:
        data = json.loads(text, object_pairs_hook=_object, parse_float=_number, parse_constant=_not_json)
        json.dumps(data, ensure_ascii=False).encode()
    except ValueError:  # JSONDecodeError, UnicodeEncodeError, the constants
        raise InvalidInput("invalid_json", "request body is not valid JSON") from None
    return data


def _read_body(event: dict[str, Any], route: Route) -> dict[str, Any]:
    """The body's fields. A route without body fields takes no body, an
    empty one or {} (many HTTP clients send one); any field on it is refused."""
    text = _body_text(event)
    if not text and route.body is None:
        return {}
    data = parse_body(text) if text else None
    if not isinstance(data, dict):
        raise InvalidInput("invalid_body", "request body must be a JSON object")
    declared = {spec.name for spec in route.fields if spec.where == "body"}
    unknown = next((key for key in data if key not in declared), None)
    if unknown is not None:
        raise InvalidInput("invalid_body", f"request body has an unknown field '{unknown}'")
    return data


def _read(route: Route, event: dict[str, Any], headers: dict[str, list[Any]]) -> dict[str, Any]:
    path = event.get("pathParameters") or {}
    body = _read_body(event, route)
    query = merged(event.get("queryStringParameters"), event.get("multiValueQueryStringParameters"), str)
    values = {}
    for spec in route.fields:
        if spec.where == "body":
            value = body.get(spec.name)
        elif spec.where == "path":
            value = path[spec.name]
        else:
            value = _one((headers if spec.where == "header" else query).get(spec.name))
            if spec.schema.get("type") == "integer":
                value = _integer(value)
        values[spec.name] = spec.default if value is None else value
    return values


def resolve(routes: Routes, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """What every handler returns. In order: the body's size, the route (and
    its path parameters), the media type, the body, then the handler, whose
    use case checks every value."""
    try:
        body = event.get("body")
        if body and body_size(event) > MAX_BODY_BYTES:
            return error_response(
                413, "payload_too_large", f"request body is larger than {MAX_BODY_BYTES} bytes"
            )
        method = str(event.get("httpMethod") or "").upper()
        route = routes.table.get((method, str(event.get("resource"))))
        path = event.get("pathParameters") or {}
        if route is None or not all(path.get(f.name) for f in route.fields if f.where == "path"):
            return error_response(404, "route_not_found", "no such route")
        headers = merged(event.get("headers"), event.get("multiValueHeaders"), str.lower)
        media_types = {str(given).split(";")[0].strip().lower() for given in headers.get("content-type", [])}
        if (body or route.body is not None) and media_types - {JSON}:
            return error_response(415, "unsupported_media_type", "send the request body as application/json")
        return route.handler(Request(event, context, method, _read(route, event, headers)))
    except IdBlocksError as error:
        return _on_domain_error(error)
    except Exception:  # noqa: BLE001 - the one place every other failure becomes a logged 500
        logger.exception("unexpected error")
        return error_response(500, "internal_error", "internal error; it has been logged")


def caller_of(event: dict[str, Any]) -> str:
    """Who is calling, as API Gateway authenticated them: the IAM principal,
    else the API key, else nobody in particular (ClientAuth NONE)."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    if identity.get("userArn"):
        return f"iam:{identity['userArn']}"
    if identity.get("apiKeyId"):
        return f"apikey:{identity['apiKeyId']}"
    return "anonymous"


# -- answering ---------------------------------------------------------------------


def status_of(error: IdBlocksError) -> int:
    """The catalogue's status for the error's code; a code missing from it is
    a bug, answered as one (tests/infra/test_error_catalogue.py keeps them in step)."""
    entry = ERROR_CODES.get(error.code)
    return entry.status if entry is not None and isinstance(entry.status, int) else 500


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A proxy response: ``body`` as compact JSON, or no body (and no
    Content-Type) when it is None."""
    multi = {"Cache-Control": ["no-store"]}
    for key, value in (headers or {}).items():
        multi[key] = [value]
    if body is not None:
        multi.setdefault("Content-Type", [JSON])
        body = json.dumps(body, separators=(",", ":"))
    return {"statusCode": status, "body": body, "isBase64Encoded": False, "multiValueHeaders": multi}


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return json_response(status, error_body(code, message), headers)


def _on_domain_error(error: IdBlocksError) -> dict[str, Any]:
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
