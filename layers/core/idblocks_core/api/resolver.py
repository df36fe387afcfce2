"""What the three handlers share about HTTP: the router they are built on,
the body limit and parser, the validation of every declared field
(api/fields.py), the one mapping from exceptions to status codes, the error
body and the caller's identity.

The router is ours, a few dozen lines, because the cold start is billed:
Powertools' Event Handler with pydantic validation cost about 70 ms of every
cold start (bench/results/server.json) for three routes whose requests have
one to three fields. Its contract is kept as that resolver answered: the
same routing (paths matched as sent, a trailing slash ignored, an unknown
method or path is 404), the same order of checks (body size and media type,
then path, query and header parameters, then the body, reporting the first
problem), the same error codes and messages. The route descriptions stay
rich enough for localrun/openapi.py to build the OpenAPI document from them
with Powertools at development time.

Every response carries ``Cache-Control: no-store``: an ID served from a cache
is an ID handed out twice.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idblocks_core.api.fields import FIELD_CHECKS, Field, Refused
from idblocks_core.domain.errors import ERROR_CODES, IdBlocksError, InvalidInput
from idblocks_core.observability import logger

JSON = "application/json"
NO_STORE = {"Cache-Control": "no-store"}
UNSUPPORTED_MEDIA_TYPE = "send the request body as application/json"

# Every valid body is a few dozen bytes; anything this large is not one, and
# refusing it before parsing bounds what a request can make the parser do:
# no integer literal in a body that passes can reach CPython's 4,300-digit
# limit.
MAX_BODY_BYTES = 4096
# Nesting beyond this is refused before json.loads sees it (which raises
# RecursionError far deeper, and would otherwise build it all). 200 levels is
# where pydantic-core's parser, which read the bodies before, drew the line:
# the same bodies are refused.
MAX_JSON_DEPTH = 200

# Each field the router validates, and the core's check that words its
# refusal ("count must be an integer from 1 to N"), by lower-case name.
_FIELD_CHECKS = FIELD_CHECKS


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

# How API Gateway authenticates callers (template.yaml), for the OpenAPI
# document (localrun/openapi.py defines the schemes). next and batch take
# whichever the deployment's ClientAuth chose; the admin routes always SigV4.
CLIENT_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"api_key": []}, {}]
ADMIN_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}]


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


def _on_unexpected() -> dict[str, Any]:
    logger.exception("unexpected error")
    return error_response(500, "internal_error", "internal error; it has been logged")


class InvalidJson(Exception):
    """The body is not JSON (syntax), as opposed to JSON of the wrong shape."""


def _first_too_deep(text: str) -> int | None:
    """Where the first value nested deeper than MAX_JSON_DEPTH starts (a
    value's depth: how many arrays and objects enclose it), or None. That is
    where pydantic-core's parser, which read the bodies before, stopped:
    201 nested empty arrays pass, 201 arrays around a number do not."""
    depth = 0
    for token in _TOKEN_RE.finditer(text):
        char = token.group()[0]
        if char in "]}":
            depth -= 1
            continue
        if char in ",:":
            continue
        if depth > MAX_JSON_DEPTH:
            return token.start()
        if char in "[{":
            depth += 1
    return None


# Strings (with their escapes) are one token, so brackets inside them are
# text; so are scalars. White space is skipped.
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{},:]|[^\s\[\]{},:"]+', re.DOTALL)
_LONE_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def parse_body(text: str) -> Any:
    """The body as JSON, refusing what pydantic-core's parser refused before:
    nesting too deep (json.loads would raise RecursionError, a 500, or build
    it all) is invalid_body, unless a syntax error comes first; lone
    surrogates (escaped or not), which json.loads takes and no UTF-8 text can
    carry, are not JSON."""
    too_deep_at = _first_too_deep(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if too_deep_at is not None and too_deep_at <= exc.pos:
            raise _nested_too_deeply() from None
        raise InvalidJson from None
    except (ValueError, RecursionError):
        if too_deep_at is not None:
            raise _nested_too_deeply() from None
        raise InvalidJson from None
    if too_deep_at is not None:
        raise _nested_too_deeply()
    if ("\\u" in text or _LONE_SURROGATE_RE.search(text)) and _has_lone_surrogate(data):
        raise InvalidJson
    return data


def _nested_too_deeply() -> InvalidInput:
    return InvalidInput("invalid_body", "request body is nested too deeply")


def _has_lone_surrogate(data: Any) -> bool:
    if isinstance(data, str):
        return bool(_LONE_SURROGATE_RE.search(data))
    if isinstance(data, list):
        return any(_has_lone_surrogate(item) for item in data)
    if isinstance(data, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in data.items())
    return False


# -- routing -----------------------------------------------------------------

# The characters a path parameter may match, as API Gateway's routing
# resolvers have always matched them (RFC 3986's unreserved and sub-delims,
# some unsafe ones, and word characters); "/" is not one of them.
_SEGMENT = r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+"


@dataclass(frozen=True)
class Route:
    """One operation. ``params`` and ``body`` are field declarations; the
    rest (summary, responses, security) is for the OpenAPI document."""

    method: str
    rule: str
    pattern: re.Pattern[str]
    handler: Callable[..., dict[str, Any]]
    params: tuple[Field, ...]
    body: str | None
    body_fields: tuple[Field, ...]
    summary: str
    responses: tuple[Any, ...]
    security: list[dict[str, list[str]]]


class Request:
    """What a handler is given: the validated values, by argument name, and
    the invocation."""

    __slots__ = ("context", "event", "method", "values")

    def __init__(self, event: dict[str, Any], context: Any, method: str, values: dict[str, Any]) -> None:
        self.event = event
        self.context = context
        self.method = method
        self.values = values

    def __getitem__(self, argument: str) -> Any:
        return self.values[argument]

    @property
    def caller(self) -> str:
        return caller_of(self.event)


class Api:
    """The routes of one function."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def route(
        self,
        rule: str,
        methods: tuple[str, ...],
        *,
        summary: str,
        responses: tuple[Any, ...],
        security: list[dict[str, list[str]]],
        params: tuple[Field, ...] = (),
        body: str | None = None,
    ) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
        """Register ``handler(request)`` for ``methods`` on ``rule`` (with
        ``<name>`` for a path parameter). ``responses`` is (success status,
        its schema's name or None, error codes or statuses...)."""
        from idblocks_core.api.fields import BODIES

        rule = rule.rstrip("/")
        pattern = re.compile("^" + re.sub(r"<(\w+)>", lambda m: f"(?P<{m[1]}>{_SEGMENT})", rule) + "/*$")

        def register(handler: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
            for method in methods:
                self.routes.append(
                    Route(
                        method.upper(),
                        rule,
                        pattern,
                        handler,
                        params,
                        body,
                        BODIES[body] if body else (),
                        summary,
                        responses,
                        security,
                    )
                )
            return handler

        return register

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.method == method:
                found = route.pattern.match(path)
                if found:
                    return route, found.groupdict()
        return None


class _Problem(Exception):
    """A field the documented schema refuses: the first one is reported."""

    def __init__(self, field: str, given: Any) -> None:
        self.field = field
        self.given = given


class _NotAnObject(Exception):
    pass


class _UnknownField(Exception):
    def __init__(self, field: str) -> None:
        self.field = field


def _query(event: dict[str, Any]) -> dict[str, Any]:
    """Query parameters as the documented scalars see them: a name's values
    from multiValueQueryStringParameters when it is there (one value is that
    value; several, which no scalar takes, stay a list), else its single
    value as API Gateway gave it."""
    values: dict[str, Any] = dict(event.get("queryStringParameters") or {})
    for key, given in (event.get("multiValueQueryStringParameters") or {}).items():
        values[key] = given[0] if isinstance(given, list) and len(given) == 1 else given
    return values


def _headers(event: dict[str, Any]) -> dict[str, Any]:
    """Headers by lower-case name, from multiValueHeaders when the event has
    any (as for the query, one value is that value, several stay a list),
    else from headers."""
    source = event.get("multiValueHeaders") or event.get("headers") or {}
    values = {}
    for key, given in source.items():
        values[str(key).lower()] = given[0] if isinstance(given, list) and len(given) == 1 else given
    return values


def _validate_params(route: Route, path_args: dict[str, str], event: dict[str, Any]) -> tuple[dict, list]:
    values: dict[str, Any] = {}
    problems: list[_Problem] = []
    sources = {"path": path_args}
    for where in ("path", "query", "header"):
        fields = [f for f in route.params if f.where == where]
        if not fields:
            continue
        given = sources.get(where)
        if given is None:
            given = sources[where] = _query(event) if where == "query" else _headers(event)
        for spec in fields:
            value = given.get(spec.name)
            if value is None:
                if spec.required:
                    problems.append(_Problem(spec.name, None))
                else:
                    values[spec.argument] = spec.default
                continue
            try:
                values[spec.argument] = spec.accept(value)
            except Refused:
                problems.append(_Problem(spec.name, value))
    return values, problems


def _decoded_body(event: dict[str, Any]) -> str | None:
    body = event.get("body")
    if body and event.get("isBase64Encoded"):
        try:
            return base64.b64decode(str(body).encode(), validate=False).decode()
        except (binascii.Error, ValueError):
            raise InvalidInput("invalid_body", "request body is not UTF-8 text") from None
    return body


def _validate_body(route: Route, event: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The body's fields, or what is wrong with the first: pydantic's order,
    the declared fields in order, then unknown ones."""
    text = _decoded_body(event)
    data = parse_body(text) if text else None
    if not isinstance(data, dict):
        return {}, [_NotAnObject()]
    values: dict[str, Any] = {}
    problems: list[Any] = []
    for spec in route.body_fields:
        if spec.name not in data:
            if spec.required:
                problems.append(_Problem(spec.name, None))
            else:
                values[spec.argument] = spec.default
            continue
        given = data[spec.name]
        if given is None and not spec.required and spec.default is None:
            values[spec.argument] = None  # an optional field without a default may be sent as null
            continue
        try:
            values[spec.argument] = spec.accept(given)
        except Refused:
            problems.append(_Problem(spec.name, given))
    declared = {spec.name for spec in route.body_fields}
    problems += [_UnknownField(key) for key in data if key not in declared]
    return values, problems


def _refusal(problem: Any) -> dict[str, Any]:
    """The first problem, in the core's words (its field's check)."""
    if isinstance(problem, _NotAnObject):
        return error_response(400, "invalid_body", "request body must be a JSON object")
    if isinstance(problem, _UnknownField):
        return error_response(400, "invalid_body", f"request body has an unknown field '{problem.field}'")
    try:
        FIELD_CHECKS[problem.field](problem.given)
    except InvalidInput as refused:
        return error_response(400, refused.code, refused.message)
    # The schema refused what the core would take: the declarations and the
    # core disagree, which is a bug; still the caller's request is refused.
    logger.warning("validation and core disagree", field=problem.field)
    return error_response(400, "invalid_body", f"{problem.field} is not valid here")


def _media_type(event: dict[str, Any]) -> str | None:
    given = [v for k, v in (event.get("headers") or {}).items() if str(k).lower() == "content-type"]
    return str(given[0]).split(";")[0].strip().lower() if given else None


def resolve(app: Api, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """What every handler returns. The body's size and media type are
    checked first, whatever the route; then the route, its parameters and
    its body, in that order; then the handler runs."""
    body = event.get("body")
    media_type = _media_type(event)
    if body:
        if body_size(event) > MAX_BODY_BYTES:
            return _raw_error(413, "payload_too_large", f"request body is larger than {MAX_BODY_BYTES} bytes")
        if media_type not in (None, JSON):
            return _raw_error(415, "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE)
    try:
        found = app.match(str(event.get("httpMethod") or "").upper(), str(event.get("path") or ""))
        if found is None:
            return error_response(404, "route_not_found", "no such route")
        route, path_args = found
        values, problems = _validate_params(route, path_args, event)
        if route.body is not None:
            if media_type not in (None, JSON):
                # an empty body that still claims to be something else
                return error_response(415, "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE)
            try:
                body_values, body_problems = _validate_body(route, event)
            except InvalidJson:
                return error_response(400, "invalid_json", "request body is not valid JSON")
            values.update(body_values)
            problems += body_problems
        if problems:
            return _refusal(problems[0])
        return route.handler(Request(event, context, route.method, values))
    except IdBlocksError as error:
        return _on_domain_error(error)
    except Exception:  # noqa: BLE001 - the one place every other failure becomes a logged 500
        return _on_unexpected()


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
    """An error answered before routing, in the proxy response format."""
    return {
        "statusCode": status,
        "multiValueHeaders": {"Content-Type": [JSON], **{k: [v] for k, v in NO_STORE.items()}},
        "body": json.dumps(error_body(code, message)),
        "isBase64Encoded": False,
    }


def caller_of(event: dict[str, Any]) -> str:
    """Who is calling, as API Gateway authenticated them: the IAM principal,
    else the API key, else nobody in particular (ClientAuth NONE)."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    if identity.get("userArn"):
        return f"iam:{identity['userArn']}"
    if identity.get("apiKeyId"):
        return f"apikey:{identity['apiKeyId']}"
    return "anonymous"
