"""Bodies built to break the JSON parser, on every route that takes a body.
With json.loads as the parser, deep nesting raised RecursionError and an
integer literal past CPython's 4,300-digit limit raised ValueError: both were
500 internal_error with a traceback in the log. Each must be a 4xx with an
error code, change nothing and log no traceback."""

from __future__ import annotations

import pytest

from idblocks_core.api import gateway as http

# (event, path name, the field a number goes in, the code that field answers with)
BODY_ROUTES = [
    pytest.param("batch", "orders", "count", "invalid_count", id="batch"),
    pytest.param("admin-create", None, "start", "invalid_start", id="admin-create"),
    pytest.param("admin-set", "orders", "next", "invalid_next", id="admin-set"),
]


def nested(field: str, depth: int) -> str:
    return f'{{"{field}": ' + "[" * depth + "]" * depth + "}"


def long_integer(field: str, digits: int, sign: str = "") -> str:
    return f'{{"name": "fresh", "{field}": {sign}' + "9" * digits + "}"


HOSTILE = [
    # too large to be any valid body, whatever it holds
    pytest.param(lambda field: nested(field, 10_000), 413, "payload_too_large", id="nested-10000-deep"),
    pytest.param(lambda field: long_integer(field, 5_000), 413, "payload_too_large", id="5000-digit-integer"),
    # within the size limit, nested deeper than the parser goes
    pytest.param(lambda field: nested(field, 1_500), 400, "invalid_body", id="nested-1500-deep"),
    pytest.param(lambda field: nested(field, 250), 400, "invalid_body", id="nested-250-deep"),
]


@pytest.fixture
def existing(api):
    assert api.call("admin-create", body={"name": "orders"}).status == 201


def send(api, event: str, name: str | None, body: str):
    kwargs = {"raw_body": body}
    if name is not None:
        kwargs["name"] = name
    return api.call(event, **kwargs)


@pytest.mark.parametrize(("event", "name", "field", "_"), BODY_ROUTES)
@pytest.mark.parametrize(("make_body", "status", "code"), HOSTILE)
def test_hostile_bodies_are_4xx_and_change_nothing(
    api, existing, table_snapshot, capsys, event, name, field, _, make_body, status, code
):
    """Deep nesting and huge integers: 4xx with a code, nothing written, no traceback."""
    before = table_snapshot()
    capsys.readouterr()
    reply = send(api, event, name, make_body(field))
    assert (reply.status, reply.error_code) == (status, code), reply.body
    assert table_snapshot() == before
    assert "Traceback" not in capsys.readouterr().out


@pytest.mark.parametrize("sign", ["", "-"])
@pytest.mark.parametrize(("event", "name", "field", "code"), BODY_ROUTES)
def test_the_longest_integers_that_fit_are_refused_by_their_field(
    api, existing, table_snapshot, capsys, event, name, field, code, sign
):
    """A 4,000-digit integer fits in the size limit; it is read and refused
    like any out-of-range value of its field."""
    body = long_integer(field, 4_000, sign)
    assert len(body) <= http.MAX_BODY_BYTES
    before = table_snapshot()
    capsys.readouterr()
    reply = send(api, event, name, body.replace('"name": "fresh", ', "") if event != "admin-create" else body)
    assert (reply.status, reply.error_code) == (400, code), reply.body
    assert table_snapshot() == before
    assert "Traceback" not in capsys.readouterr().out


def test_the_size_limit_is_on_the_bytes_sent(api, existing, table_snapshot):
    """A body just at the limit is read (and judged on its content); one byte more is 413."""
    padding = " " * (http.MAX_BODY_BYTES - len('{"count": 1}'))
    at_limit = '{"count": 1}' + padding
    assert len(at_limit.encode()) == http.MAX_BODY_BYTES
    assert api.call("batch", name="orders", raw_body=at_limit).status == 200
    before = table_snapshot()
    reply = api.call("batch", name="orders", raw_body=at_limit + " ")
    assert (reply.status, reply.error_code) == (413, "payload_too_large")
    assert reply.headers["Cache-Control"] == "no-store"
    assert table_snapshot() == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"count": 5}', {"count": 5}),
        ('{"a": [1, {"b": null}], "c": -3}', {"a": [1, {"b": None}], "c": -3}),
    ],
)
def test_the_parser_reads_ordinary_json_as_json_loads_does(text, expected):
    assert http.parse_body(text) == expected


@pytest.mark.parametrize("text", ["{", "not json", '{"count": 1,}'])
def test_the_parser_reports_syntax_errors_as_invalid_json(api, existing, text):
    reply = api.call("batch", name="orders", raw_body=text)
    assert (reply.status, reply.error_code) == (400, "invalid_json")
