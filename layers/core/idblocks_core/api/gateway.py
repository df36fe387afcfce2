"""HTTP for the three functions, as API Gateway's REST proxy integration
hands a request over and takes the answer back.

API Gateway has matched the route before a function runs: ``httpMethod`` and
``resource`` pick the handler, ``pathParameters`` carry the name (``path``,
which carries a custom domain's base path, is never read). Each request is
read one way: one case-insensitive view of ``headers`` and
``multiValueHeaders``, one parse of the body, refusing a key given twice (a
proxy may read the first value, json.loads keeps the last). The use case's
domain rules check every value; the declarations here say where each comes
from, for the OpenAPI document (localrun/openapi.py). Every answer is
``Cache-Control: no-store``: an ID served from a cache is handed out twice;
and ``X-Content-Type-Options: nosniff``: a JSON body is never run as a page.

An event is answered only if it came through this deployment's API stage
(``requestContext.stage`` is the template's StageName, ``apiId`` is set):
anything else (another stage, an event written by hand) is refused and
logged. What that does and does not stop is in docs/security.md: whoever
may invoke the function directly can write any event, so the defence is
that no caller needs or gets lambda:InvokeFunction."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idblocks_core.core import core
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

ALLOCATION_ERRORS = (
    "counter_not_found",
    "counter_exhausted",
    "region_mismatch",
    "request_in_progress",
    "idempotency_key_reused",
    "counter_moved_back",
)
# As template.yaml authenticates: next and batch by ClientAuth, admin always SigV4.
CLIENT_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"api_key": []}, {}]
ADMIN_SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}]

Handler = Callable[["Request"], dict[str, Any]]


@dataclass(frozen=True)
class Field:
    """A value a route reads: ``name`` as the request spells it (a header's in
    lower case), ``where`` it comes from, ``schema`` what the document says it
    takes; ``maximum_from``: the template parameter whose default is its maximum."""

    name: str
    where: str
    schema: dict[str, Any]
    description: str
    required: bool = False
    default: Any = None
    maximum_from: str = ""

    @property
    def code(self) -> str:
        """The error a bad value gets (the domain's check words it)."""
        return "invalid_" + self.name.replace("-", "_")


@dataclass(frozen=True)
class Route:
    """An operation. ``tag`` and ``operation_id`` (the handler's name if not
    given) name the module and the function a generated client puts it in.
    ``body`` names its body's schema (None: no body fields); ``answers``:
    the success status, its schema (or None), the error codes besides its
    fields'; ``one_of``: body fields of which one must be given."""

    method: str
    resource: str
    handler: Handler
    tag: str
    summary: str
    fields: tuple[Field, ...]
    answers: tuple[Any, ...]
    security: list[dict[str, list[str]]]
    body: str | None = None
    one_of: tuple[str, ...] = ()
    operation_id: str = ""


class Routes(dict[tuple[str, str], Route]):
    """A function's routes, by (method, resource) as API Gateway names them."""

    def route(self, method: str, resource: str, **declared: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self[method, resource] = Route(method, resource, handler, **declared)
            return handler

        return register


@dataclass(frozen=True, slots=True)
class Request:
    """A handler's input: each declared value by name (None if left out)."""

    event: dict[str, Any]
    context: Any
    method: str
    values: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def caller(self) -> str:
        """Who is calling, as API Gateway authenticated them: the IAM principal,
        else the API key, else nobody in particular (ClientAuth NONE)."""
        identity = (self.event.get("requestContext") or {}).get("identity") or {}
        if identity.get("userArn"):
            return f"iam:{identity['userArn']}"
        if identity.get("apiKeyId"):
            return f"apikey:{identity['apiKeyId']}"
        return "anonymous"


def merged(
    single: dict[str, Any] | None, multi: dict[str, Any] | None, fold: Callable[[str], str]
) -> dict[str, Any]:
    """Every value of each name: API Gateway puts all in the multi-value map,
    the last in the other; names folded by ``fold`` (lower case for headers)."""
    values: dict[str, list[Any]] = {}
    for name, given in (multi or {}).items():
        values.setdefault(fold(name), []).extend(given if isinstance(given, list) else [given])
    for name, given in (single or {}).items():
        values.setdefault(fold(name), [given])
    return values


# A query string's integer: ASCII digits (single underscores between; at most
# the 4,300 int() reads), a sign, a fraction of zeros, white space around; else
# it stays text, which the domain's check refuses in its own words.
_INTEGER_TEXT = re.compile(r"\s*([+-]?[0-9](?:_?[0-9]){0,4299})(?:\.0+)?\s*")


# A query string's boolean, as OpenAPI writes one; any other text stays text,
# which the domain's check refuses.
_QUERY_BOOLEANS = {"true": True, "false": False}


def _integer(text: Any) -> Any:
    found = _INTEGER_TEXT.fullmatch(text) if isinstance(text, str) else None
    return int(found[1]) if found else text


def _body_text(event: dict[str, Any]) -> str | None:
    """The body as text; refused if its bytes as sent are over MAX_BODY_BYTES,
    or (base64, as API Gateway passes binary) not UTF-8."""
    body = event.get("body")
    if not body:
        return body
    encoded = event.get("isBase64Encoded")
    try:
        raw = base64.b64decode(str(body)) if encoded else str(body).encode(errors="surrogatepass")
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidInput("payload_too_large", f"request body is larger than {MAX_BODY_BYTES} bytes")
        return raw.decode() if encoded else str(body)
    except ValueError:  # not base64 (binascii.Error), or not UTF-8
        raise InvalidInput("invalid_body", "request body is not UTF-8 text") from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for i, key in enumerate(keys) if key in keys[:i])
        raise InvalidInput("invalid_body", f"request body gives the key '{twice}' twice")
    return data


def _number(text: str) -> int | float:
    """The document's integer is JSON Schema's, any number with a zero
    fraction (5.0, 1e2): read exactly as one (a float would round
    9007199254740993.0); one far beyond any ID stays a float, no check takes it."""
    from decimal import Decimal  # paid only by a body with a fraction or an exponent

    value = Decimal(text)
    whole = value.adjusted() <= 20 and value == value.to_integral_value()
    return int(value) if whole else float(text)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


# Strings (with their escapes) are one token, so brackets inside them are text.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)

# Built once: json.loads and json.dumps with any argument of their own build
# a decoder or encoder on every call, a good part of what a warm request's
# body and answer cost.
_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_number, parse_constant=_not_json)
_TEXT_ENCODER = json.JSONEncoder(ensure_ascii=False)
_COMPACT_ENCODER = json.JSONEncoder(separators=(",", ":"))


def parse_body(text: str) -> Any:
    """The body as JSON: nesting past MAX_JSON_DEPTH refused before parsing, a
    key given twice (at any depth) refused naming it; lone surrogates (no UTF-8
    text carries one), NaN and Infinity are not JSON."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else it cannot be nested that deep
        depth = 0
        for token in _BRACKETS.finditer(text):
            char = token.group()[0]
            depth += 1 if char in "[{" else -1 if char in "]}" else 0
            if depth > MAX_JSON_DEPTH:
                raise InvalidInput("invalid_body", "request body is nested too deeply")
    try:
        data = _DECODER.decode(text)
        # A lone surrogate comes only from a \u escape or from the text itself
        # (non-ASCII): an ASCII body without one, every client's, cannot hold one.
        if not text.isascii() or "\\u" in text:
            _TEXT_ENCODER.encode(data).encode()
    except ValueError:  # JSONDecodeError, UnicodeEncodeError, the constants
        raise InvalidInput("invalid_json", "request body is not valid JSON") from None
    return data


def _read_body(text: str | None, route: Route) -> dict[str, Any]:
    """The body's fields. A route without any takes no body, an empty one,
    null or {} (what HTTP clients send for none); GET and DELETE, whose
    bodies HTTP gives no meaning, ignore theirs, as they always have."""
    if route.body is None and (not text or route.method in ("GET", "DELETE")):
        return {}
    data = parse_body(text) if text else None
    if data is None and route.body is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInput("invalid_body", "request body must be a JSON object")
    declared = {spec.name for spec in route.fields if spec.where == "body"}
    unknown = next((key for key in data if key not in declared), None)
    if unknown is not None:
        raise InvalidInput("invalid_body", f"request body has an unknown field '{unknown}'")
    return data


def resolve(routes: Routes, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """What every handler returns: the body's size, the route, the media type,
    the body, then the handler (whose use case checks every value)."""
    try:
        if not _from_this_stage(event):
            return error_response(
                403, "foreign_event", "this function answers only its own API stage's requests"
            )
        text = _body_text(event)
        method = str(event.get("httpMethod") or "").upper()
        route = routes.get((method, str(event.get("resource"))))
        path = event.get("pathParameters") or {}
        if route is None or not all(path.get(f.name) for f in route.fields if f.where == "path"):
            return error_response(404, "route_not_found", "no such route")
        headers = merged(event.get("headers"), event.get("multiValueHeaders"), str.lower)
        media_types = {str(given).split(";")[0].strip().lower() for given in headers.get("content-type", [])}
        if (text or route.body is not None) and media_types - {JSON}:
            sent = ", ".join(sorted(media_types))[:100]
            message = f"send the request body as JSON, with the header Content-Type: {JSON} (not {sent})"
            return error_response(415, "unsupported_media_type", message)
        query = merged(event.get("queryStringParameters"), event.get("multiValueQueryStringParameters"), str)
        sources = {"path": path, "body": _read_body(text, route), "header": headers, "query": query}
        values = {}
        for spec in route.fields:
            value = sources[spec.where].get(spec.name)
            if spec.where in ("header", "query"):  # every value given, in a list
                given = value or [None]
                value = given[0] if len(given) == 1 else given  # given twice: a list, which no check takes
                if spec.schema.get("type") == "integer":
                    value = _integer(value)
                elif spec.schema.get("type") == "boolean" and isinstance(value, str):
                    value = _QUERY_BOOLEANS.get(value, value)
            values[spec.name] = spec.default if value is None else value
        return route.handler(Request(event, context, method, values))
    except IdBlocksError as error:
        status = status_of(error)
        if status >= 500:
            cause = None if error.__cause__ is None else repr(error.__cause__)
            logger.warning("request failed", error_code=error.code, error=error.message, cause=cause)
        retry_after = getattr(error, "retry_after_seconds", None)
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return error_response(status, error.code, error.message, headers)
    except Exception:  # noqa: BLE001 - the one place every other failure becomes a logged 500
        logger.exception("unexpected error")
        return error_response(500, "internal_error", "internal error; it has been logged")


def _from_this_stage(event: dict[str, Any]) -> bool:
    """Whether API Gateway's part of the event names this deployment's stage;
    an event that does not is logged with what it claimed, and refused."""
    claimed = event.get("requestContext") if isinstance(event, dict) else None
    context: dict[str, Any] = claimed if isinstance(claimed, dict) else {}
    stage, api_id = context.get("stage"), context.get("apiId")
    expected = core().settings.api_stage
    if stage == expected and isinstance(api_id, str) and api_id:
        return True
    claimed = context.get("identity")
    identity: dict[str, Any] = claimed if isinstance(claimed, dict) else {}
    logger.warning(
        "event refused: not from this API stage",
        # repr, cut short: what an event claims is anything its writer chose
        claimed_stage=repr(stage)[:200],
        claimed_api_id=repr(api_id)[:200],
        expected_stage=expected,
        claimed_caller=repr(identity.get("userArn") or identity.get("apiKeyId"))[:300],
    )
    return False


def status_of(error: IdBlocksError) -> int:
    """The catalogue's status for the error's code; a code missing from it is a bug."""
    entry = ERROR_CODES.get(error.code)
    return entry.status if entry is not None and isinstance(entry.status, int) else 500


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A proxy response: ``body`` as compact JSON, or none (no Content-Type) for None."""
    multi = {"Cache-Control": ["no-store"], "X-Content-Type-Options": ["nosniff"]}
    multi |= {key: [value] for key, value in (headers or {}).items()}
    if body is not None:
        multi.setdefault("Content-Type", [JSON])
        body = _COMPACT_ENCODER.encode(body)
    return {"statusCode": status, "body": body, "isBase64Encoded": False, "multiValueHeaders": multi}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return json_response(status, {"error": {"code": code, "message": message}}, headers)
