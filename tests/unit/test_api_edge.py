"""The HTTP edge as API Gateway drives it: each request is read one way.

- A body with a key given twice is ambiguous (a proxy, a WAF rule or a log
  line may read the first value, json.loads keeps the last): refused, naming
  the key, before anything is allocated or written.
- The route is what API Gateway matched (httpMethod, resource) and the name
  is its pathParameters: behind a custom domain's base path mapping, `path`
  carries the base path, and every route still answers.
- Headers are one case-insensitive view of `headers` and `multiValueHeaders`:
  a Content-Type given in either is read.
- next takes no body: fields on it are refused as unknown fields are on
  batch; an empty body or {} is accepted.
"""

from __future__ import annotations

import json

import pytest

from tests.support.api import event_files, load_event


@pytest.fixture
def existing(api):
    assert api.call("admin-create", body={"name": "orders"}).status == 201


DUPLICATES = [
    pytest.param("batch", "orders", '{"count": 1, "count": 1000000}', "count", id="batch"),
    pytest.param("admin-create", None, '{"name": "a", "name": "b"}', "name", id="admin-create"),
    pytest.param("admin-set", "orders", '{"next": 5, "next": 9000}', "next", id="admin-set"),
    pytest.param("batch", "orders", '{"count": 1, "x": {"y": [{"z": 1, "z": 2}]}}', "z", id="batch-nested"),
]


@pytest.mark.parametrize(("event_name", "name", "raw_body", "key"), DUPLICATES)
def test_a_key_given_twice_is_refused_naming_it_and_nothing_changes(
    api, existing, table_snapshot, event_name, name, raw_body, key
):
    # Given a counter, When a body names one key twice
    before = table_snapshot()
    kwargs = {"raw_body": raw_body} | ({"name": name} if name else {})
    reply = api.call(event_name, **kwargs)
    # Then it is 400 invalid_body naming the key, and nothing was allocated or written
    assert (reply.status, reply.error_code) == (400, "invalid_body"), reply.body
    assert f"'{key}'" in reply.body["error"]["message"]
    assert "twice" in reply.body["error"]["message"]
    assert table_snapshot() == before


@pytest.mark.parametrize("event_file", event_files(), ids=lambda p: p.stem)
def test_every_route_answers_behind_a_base_path_mapping(api, existing, event_file):
    # Given an event as API Gateway sends it behind https://ids.example.com/v1
    event = load_event(event_file.stem)
    if event_file.stem.startswith("admin"):
        event["pathParameters"] = event["pathParameters"] and {"name": "orders"}
    if event_file.stem == "admin-create":
        event["body"] = json.dumps({"name": "fresh"})
    event["path"] = "/v1" + event["resource"].replace("{name}", "orders")
    # When it is sent, Then the route API Gateway matched answers it
    reply = api.send(event)
    assert reply.status < 300, reply.body


@pytest.mark.parametrize(
    ("event_name", "name"), [("batch", "orders"), ("admin-create", None), ("admin-set", "orders")]
)
def test_a_content_type_given_only_in_multi_value_headers_is_read(
    api, existing, table_snapshot, event_name, name
):
    # Given a body declared as text/plain in multiValueHeaders only
    event = load_event(event_name)
    if name:
        event["pathParameters"] = {"name": name}
    event["headers"].pop("Content-Type", None)
    event["multiValueHeaders"]["content-type"] = ["text/plain"]
    before = table_snapshot()
    # When it is sent, Then it is refused as not JSON, and nothing changes
    reply = api.send(event)
    assert (reply.status, reply.error_code) == (415, "unsupported_media_type")
    assert table_snapshot() == before


def test_an_idempotency_key_given_only_in_headers_is_read(api):
    # Given two unkeyed batches (two blocks), then the same key in `headers` only, twice
    replies = [api.call("batch", name="orders", body={"count": 3}).body for _ in range(2)]
    event = load_event("batch")
    event["headers"]["idempotency-key"] = "k-1"
    event["multiValueHeaders"].pop("idempotency-key", None)
    keyed = [api.send(event).body for _ in range(2)]
    # Then the second is the first's answer again: the key was read
    assert replies[0]["start"] != replies[1]["start"]
    assert keyed[0] == keyed[1]


@pytest.mark.parametrize(("raw_body", "field"), [('{"count": 5}', "count"), ('{"name": "orders"}', "name")])
def test_fields_on_next_are_refused_like_unknown_fields_and_take_nothing(
    api, existing, table_snapshot, raw_body, field
):
    # Given a caller who thinks next takes a count
    before = table_snapshot()
    reply = api.call(
        "next-post", name="orders", raw_body=raw_body, headers={"Content-Type": "application/json"}
    )
    # Then it learns otherwise, and no ID was handed out
    assert (reply.status, reply.error_code) == (400, "invalid_body")
    assert reply.body["error"]["message"] == f"request body has an unknown field '{field}'"
    assert table_snapshot() == before


@pytest.mark.parametrize("raw_body", [None, "", "{}", " {} ", "null"])
def test_next_accepts_no_body_an_empty_one_or_an_empty_object(api, raw_body):
    reply = api.call(
        "next-post", name="orders", raw_body=raw_body, headers={"Content-Type": "application/json"}
    )
    assert (reply.status, reply.body["id"]) == (200, 1)


@pytest.mark.parametrize(
    ("raw_body", "end"), [('{"count": 5.0}', 5), ('{"count": 1e1}', 10), ('{"count": 2.50e1}', 25)]
)
def test_a_whole_number_written_with_a_fraction_or_exponent_is_that_integer(api, raw_body, end):
    """The OpenAPI document's integer is JSON Schema's: any number with a
    zero fraction. The API reads such a number as the integer it is."""
    reply = api.call("batch", name="orders", raw_body=raw_body)
    assert (reply.status, reply.body["end"]) == (200, end)


def test_a_whole_number_past_a_floats_precision_is_read_exactly(api):
    reply = api.call("admin-create", raw_body='{"name": "big", "start": 9007199254740993.0, "max": 1e18}')
    assert (reply.status, reply.body["next"]) == (201, 9007199254740993)


@pytest.mark.parametrize("raw_body", ['{"count": 5.5}', '{"count": 1e-1}', '{"count": 1e400}'])
def test_a_number_with_a_fraction_is_no_count(api, raw_body):
    reply = api.call("batch", name="orders", raw_body=raw_body)
    assert (reply.status, reply.error_code) == (400, "invalid_count")


@pytest.mark.parametrize("raw_body", ['{"count": NaN}', '{"count": Infinity}', '{"count": -Infinity}'])
def test_nan_and_infinity_are_not_json(api, raw_body):
    reply = api.call("batch", name="orders", raw_body=raw_body)
    assert (reply.status, reply.error_code) == (400, "invalid_json")


def test_a_cursor_given_twice_is_refused(api):
    event = load_event("admin-list")
    event["multiValueQueryStringParameters"] = {"cursor": ["W10", "W10"]}
    reply = api.send(event)
    assert (reply.status, reply.error_code) == (400, "invalid_cursor")


@pytest.mark.parametrize("event_name", ["next-get", "admin-get", "admin-delete"])
def test_get_and_delete_ignore_a_body_as_they_always_have(api, existing, event_name):
    event = load_event(event_name)
    event["pathParameters"] = {"name": "orders"}
    event["body"] = '{"name": "orders"}'
    assert api.send(event).status < 300
