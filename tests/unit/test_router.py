"""The HTTP edge (idblocks_core.api.gateway), where it answers what the
Powertools resolver it replaced did not answer well: bodies it could not
decode and empty bodies declared as forms were 500s, and a lower-case GET
slipped past AllowGetNext. And what it must keep answering as before:
routing, optional fields sent as null, repeated query parameters."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from idblocks_core.domain.rules import LIST_LIMIT_MAX
from localrun.invoke import LocalContext, load_handler
from tests.support.api import load_event


def send_to_next(api, event: dict) -> tuple[int, str | None, dict]:
    """Straight to the next function: API Gateway would not route these
    methods to it, and the function must still answer them sanely."""
    spec = api.functions["NextFunction"]
    raw = load_handler(spec)(copy.deepcopy(event), LocalContext("NextFunction", spec.timeout_seconds))
    headers = {k: v[-1] for k, v in raw["multiValueHeaders"].items()}
    code = json.loads(raw["body"])["error"]["code"] if raw["body"] else None
    return raw["statusCode"], code, headers


BODY_EVENTS = [
    pytest.param("batch", "orders", id="batch"),
    pytest.param("admin-create", None, id="admin-create"),
    pytest.param("admin-set", "orders", id="admin-set"),
]


@pytest.fixture
def existing(api):
    assert api.call("admin-create", body={"name": "orders"}).status == 201


def base64_event(event_name: str, name: str | None, raw: bytes) -> dict:
    event = load_event(event_name)
    if name is not None:
        event["pathParameters"] = {"name": name}
        event["path"] = event["resource"].replace("{name}", name)
    event["body"] = base64.b64encode(raw).decode()
    event["isBase64Encoded"] = True
    return event


@pytest.mark.parametrize(("event_name", "name"), BODY_EVENTS)
def test_a_base64_body_that_is_not_utf8_is_400_not_500(
    api, existing, table_snapshot, capsys, event_name, name
):
    """A binary body (API Gateway base64-encodes it) that is not UTF-8 text
    raised UnicodeDecodeError in the resolver: a 500 with a traceback."""
    before = table_snapshot()
    capsys.readouterr()
    reply = api.send(base64_event(event_name, name, b'{"count": 1, "name": "\xff\xfe"}'))
    assert (reply.status, reply.error_code) == (400, "invalid_body")
    assert reply.body["error"]["message"] == "request body is not UTF-8 text"
    assert table_snapshot() == before
    assert "Traceback" not in capsys.readouterr().out


@pytest.mark.parametrize(("event_name", "name"), BODY_EVENTS)
def test_a_base64_json_body_is_read_like_a_plain_one(api, existing, event_name, name):
    body = {"batch": b'{"count": 2}', "admin-create": b'{"name": "fresh"}', "admin-set": b'{"next": 50}'}
    reply = api.send(base64_event(event_name, name, body[event_name]))
    assert reply.status in (200, 201), reply.body


@pytest.mark.parametrize(
    "content_type", ["multipart/form-data", "application/x-www-form-urlencoded", "text/plain"]
)
@pytest.mark.parametrize(("event_name", "name"), BODY_EVENTS)
def test_an_empty_body_declared_as_something_else_than_json_is_415(
    api, existing, table_snapshot, event_name, name, content_type
):
    """An empty body with a multipart type made the old resolver raise (a
    500); a form type was parsed as an empty form. Whatever its length, a
    body that says it is not JSON is refused as one."""
    before = table_snapshot()
    kwargs = {"raw_body": "", "headers": {"Content-Type": content_type}}
    if name is not None:
        kwargs["name"] = name
    reply = api.call(event_name, **kwargs)
    assert (reply.status, reply.error_code) == (415, "unsupported_media_type")
    assert reply.headers["Cache-Control"] == "no-store"
    assert table_snapshot() == before


def test_get_next_turned_off_is_405_whatever_the_case_of_the_method(api, lambda_env, table_snapshot):
    """The method matched routes case-insensitively but the AllowGetNext
    check compared it as sent: "get" handed out an ID with GET turned off."""
    lambda_env(ALLOW_GET_NEXT="false")
    before = table_snapshot()
    event = load_event("next-get")
    event["httpMethod"] = "get"
    status, code, headers = send_to_next(api, event)
    assert (status, code, headers["Allow"]) == (405, "method_not_allowed", "POST")
    assert table_snapshot() == before


def test_optional_body_fields_may_be_sent_as_null(api):
    reply = api.call("admin-create", body={"name": "fresh", "start": None, "max": None})
    assert (reply.status, reply.body["next"]) == (201, 1)


@pytest.mark.parametrize("path", ["/counters/orders/next/", "/v1/counters/orders/next", "/elsewhere"])
def test_the_path_is_not_read(api, path):
    """A trailing slash, a custom domain's base path: what API Gateway
    matched (the resource, the path parameters) is the route."""
    event = load_event("next-post")
    event["path"] = path
    reply = api.send(event)
    assert (reply.status, reply.body["id"]) == (200, 1)


@pytest.mark.parametrize("method", ["PATCH", "HEAD", "OPTIONS"])
def test_a_method_no_route_takes_is_404(api, table_snapshot, method):
    before = table_snapshot()
    event = load_event("next-post")
    event["httpMethod"] = method
    assert send_to_next(api, event)[:2] == (404, "route_not_found")
    assert table_snapshot() == before


@pytest.mark.parametrize("resource", ["/counters/{name}/batch", "/elsewhere", "/counters/{name}/next/"])
def test_a_resource_the_function_does_not_serve_is_404(api, table_snapshot, resource):
    """The route is the resource API Gateway matched, not the path."""
    before = table_snapshot()
    event = load_event("next-post")
    event["resource"] = resource
    assert send_to_next(api, event)[:2] == (404, "route_not_found")
    assert table_snapshot() == before


def test_a_query_parameter_given_twice_is_refused(api):
    event = load_event("admin-list")
    event["queryStringParameters"] = {"limit": "5"}
    event["multiValueQueryStringParameters"] = {"limit": ["4", "5"]}
    reply = api.send(copy.deepcopy(event))
    assert (reply.status, reply.error_code) == (400, "invalid_limit")


def test_a_header_given_twice_is_refused(api, table_snapshot):
    before = table_snapshot()
    event = load_event("next-post")
    event["headers"]["Idempotency-Key"] = "b"
    event["multiValueHeaders"]["Idempotency-Key"] = ["a", "b"]
    reply = api.send(event)
    assert (reply.status, reply.error_code) == (400, "invalid_idempotency_key")
    assert table_snapshot() == before


@pytest.mark.parametrize("limit", ["5", " 5 ", "5.0", "+5", "0_5"])
def test_the_page_size_is_read_as_the_documented_integer(api, existing, limit):
    reply = api.call("admin-list", query={"limit": limit})
    assert reply.status == 200, reply.body


@pytest.mark.parametrize("limit", ["5.5", "1e2", "0x5", "", "\uff15", "5,6"])
def test_a_page_size_that_is_not_an_integer_is_refused(api, limit):
    reply = api.call("admin-list", query={"limit": limit})
    assert (reply.status, reply.error_code) == (400, "invalid_limit")


@pytest.mark.parametrize("digits", [4_300, 4_301, 5_000])
def test_a_page_size_too_long_for_int_is_refused_not_a_500(api, capsys, digits):
    """int() reads no text of more than 4,300 digits (CPython's limit), and a
    query string is not held to the body's size limit: such a page size was a
    500 internal_error with a traceback in the log."""
    # Given a page size of thousands of digits
    capsys.readouterr()
    # When the list is asked for with it
    reply = api.call("admin-list", query={"limit": "9" * digits})
    # Then it is refused like any page size out of range, and nothing was logged as a crash
    assert (reply.status, reply.error_code) == (400, "invalid_limit")
    assert reply.body["error"]["message"] == f"limit must be an integer from 1 to {LIST_LIMIT_MAX}"
    assert "Traceback" not in capsys.readouterr().out


# The last: the character itself, not an escape, in a body an event carries as text.
@pytest.mark.parametrize("text", ['"\\ud800"', '"\\udc00x"', '"a\\ud83d"', '"a\ud800"'])
def test_a_lone_surrogate_escape_is_not_json(api, table_snapshot, text):
    """json.loads takes escapes of lone surrogates, which no UTF-8 text can
    carry; the parser before refused them as invalid JSON, and still does."""
    before = table_snapshot()
    reply = api.call("admin-create", raw_body='{"name": ' + text + "}")
    assert (reply.status, reply.error_code) == (400, "invalid_json")
    assert table_snapshot() == before


def test_an_escaped_surrogate_pair_is_one_character(api):
    reply = api.call("admin-create", raw_body='{"name": "a\\ud83d\\ude00"}')
    assert (reply.status, reply.error_code) == (400, "invalid_name")  # JSON, but not a counter name
