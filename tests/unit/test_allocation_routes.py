"""next and batch, through their handlers, with the events of events/*.json."""

from __future__ import annotations

import json

import pytest

from idblocks_core.domain.rules import DEFAULT_MAX_ID


def test_next_hands_out_consecutive_ids_from_1(api):
    # Given a counter nobody has used, When next is called three times
    ids = [api.call("next-post", name="orders").body for _ in range(3)]
    # Then it was auto-created at 1 and moved by one each time
    assert ids == [
        {"counter": "orders", "id": 1},
        {"counter": "orders", "id": 2},
        {"counter": "orders", "id": 3},
    ]


def test_next_by_get_shares_the_counter_and_is_never_cached(api):
    first = api.call("next-get", name="orders")
    second = api.call("next-post", name="orders")
    assert (first.status, first.body["id"], second.body["id"]) == (200, 1, 2)
    assert first.headers["Cache-Control"] == "no-store"
    assert first.headers["Content-Type"] == "application/json"


def test_batch_hands_out_adjacent_inclusive_ranges(api):
    one = api.call("batch", name="orders", body={"count": 100})
    two = api.call("batch", name="orders", body={"count": 5})
    after = api.call("next-post", name="orders")
    assert one.status == 200
    assert one.body == {"counter": "orders", "start": 1, "end": 100, "count": 100, "step": 1}
    assert two.body == {"counter": "orders", "start": 101, "end": 105, "count": 5, "step": 1}
    assert after.body["id"] == 106
    assert one.headers["Cache-Control"] == "no-store"


def test_counters_are_independent(api):
    api.call("batch", name="orders", body={"count": 10})
    assert api.call("next-post", name="invoices").body == {"counter": "invoices", "id": 1}


def test_batch_up_to_max_batch_size_is_allowed(api, lambda_env):
    lambda_env(MAX_BATCH_SIZE="50")
    reply = api.call("batch", name="orders", body={"count": 50})
    assert (reply.status, reply.body["end"]) == (200, 50)


@pytest.mark.parametrize("route", ["next-post", "batch"])
def test_unknown_counter_is_404_when_auto_create_is_off(api, lambda_env, table_snapshot, route):
    lambda_env(AUTO_CREATE_COUNTERS="false")
    before = table_snapshot()
    reply = api.call(route, name="orders")
    assert reply.status == 404
    assert reply.error_code == "counter_not_found"
    assert table_snapshot() == before


@pytest.mark.parametrize("route", ["next-post", "batch"])
def test_a_missing_counter_is_told_with_the_command_that_creates_it_and_the_parameter_that_would(
    api, lambda_env, route
):
    """A new deployment's first answer (AutoCreateCounters is false by
    default) said only "counter 'orders' does not exist": it names the
    command that creates it and the parameter that made next refuse."""
    lambda_env(AUTO_CREATE_COUNTERS="false")
    message = api.call(route, name="orders").body["error"]["message"]
    assert message == (
        "counter 'orders' does not exist (next and batch create none here: AutoCreateCounters is false): "
        "create it with `idblocks create orders` (POST /admin/counters)"
    )


def test_a_deleted_counter_is_told_how_to_create_it_and_not_about_auto_create(api):
    """Auto-creation never brings a deleted counter back, so the parameter
    is not named; the command that does is."""
    api.call("admin-create", body={"name": "orders"})
    api.call("admin-delete", name="orders")
    gone = api.call("next-post", name="orders")
    assert gone.status == 404
    message = gone.body["error"]["message"]
    assert message.endswith("create it with `idblocks create orders` (POST /admin/counters)"), message
    assert "AutoCreateCounters" not in message


def test_existing_counter_works_when_auto_create_is_off(api, lambda_env):
    lambda_env(AUTO_CREATE_COUNTERS="false")
    api.call("admin-create", body={"name": "orders", "start": 7})
    assert api.call("next-post", name="orders").body["id"] == 7


def test_allocation_past_max_is_409_and_changes_nothing(api, table_snapshot):
    api.call("admin-create", body={"name": "tiny", "max": 3})
    assert api.call("batch", name="tiny", body={"count": 2}).body["end"] == 2
    before = table_snapshot()
    too_many = api.call("batch", name="tiny", body={"count": 2})
    assert too_many.status == 409
    assert too_many.error_code == "counter_exhausted"
    assert "1 left" in too_many.body["error"]["message"]
    assert table_snapshot() == before
    # the one ID left is still there, and then nothing
    assert api.call("next-post", name="tiny").body["id"] == 3
    last = api.call("next-post", name="tiny")
    assert (last.status, last.error_code) == (409, "counter_exhausted")


def test_default_max_is_javascript_safe(api):
    api.call("admin-create", body={"name": "js", "start": DEFAULT_MAX_ID})
    assert api.call("next-post", name="js").body["id"] == DEFAULT_MAX_ID
    assert api.call("next-post", name="js").error_code == "counter_exhausted"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a" * 129, "too long"),
        ("or ders", "space"),
        ("orders/x", "slash"),
        ("ordérs", "non-ASCII"),
        ("orders$", "symbol"),
        ("orders\n", "newline"),
    ],
)
@pytest.mark.parametrize("route", ["next-post", "next-get", "batch"])
def test_bad_names_are_400_and_change_nothing(api, table_snapshot, route, name, why):
    before = table_snapshot()
    reply = api.call(route, name=name)
    assert reply.status == 400, why
    assert reply.error_code == "invalid_name"
    assert "name" in reply.body["error"]["message"]
    assert table_snapshot() == before


@pytest.mark.parametrize("route", ["next-post", "batch"])
def test_empty_name_matches_no_route(api, table_snapshot, route):
    before = table_snapshot()
    reply = api.call(route, name="")
    assert (reply.status, reply.error_code) == (404, "route_not_found")
    assert table_snapshot() == before


def test_longest_and_punctuated_names_are_fine(api):
    for name in ("a" * 128, "Orders_2026.eu-west-1", "0", "-._"):
        assert api.call("next-post", name=name).body == {"counter": name, "id": 1}


@pytest.mark.parametrize(
    ("raw_body", "code"),
    [
        (None, "invalid_body"),
        ("", "invalid_body"),
        ("{", "invalid_json"),
        ("not json", "invalid_json"),
        ("[]", "invalid_body"),
        ("42", "invalid_body"),
        ('"count"', "invalid_body"),
        ("{}", "invalid_count"),
        ('{"count": null}', "invalid_count"),
        ('{"count": "5"}', "invalid_count"),
        ('{"count": 5.5}', "invalid_count"),
        ('{"count": true}', "invalid_count"),
        ('{"count": 0}', "invalid_count"),
        ('{"count": -1}', "invalid_count"),
        ('{"count": 1000001}', "invalid_count"),
        ('{"count": 1e400}', "invalid_count"),
        ('{"count": 100000000000000000000000000000000000000000}', "invalid_count"),
        ('{"count": [5]}', "invalid_count"),
        ('{"count": {"n": 5}}', "invalid_count"),
        ('{"count": 5, "start": 1}', "invalid_body"),
    ],
)
def test_bad_batch_bodies_are_400_and_change_nothing(api, table_snapshot, raw_body, code):
    api.call("batch", name="orders", body={"count": 1})  # the counter exists
    before = table_snapshot()
    reply = api.call("batch", name="orders", raw_body=raw_body)
    assert reply.status == 400, reply.body
    assert reply.error_code == code
    assert reply.body["error"]["message"]
    assert table_snapshot() == before


def test_count_bound_follows_max_batch_size(api, lambda_env):
    lambda_env(MAX_BATCH_SIZE="10")
    reply = api.call("batch", name="orders", body={"count": 11})
    assert (reply.status, reply.error_code) == (400, "invalid_count")
    assert "1 to 10" in reply.body["error"]["message"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-www-form-urlencoded",
        "text/plain",
        "multipart/form-data",  # no boundary: a parser would choke on it
        "multipart/form-data; boundary=x",
        "application/xml",
    ],
)
def test_bodies_that_are_not_json_are_415(api, table_snapshot, content_type):
    before = table_snapshot()
    reply = api.call("batch", name="orders", raw_body='{"count": 5}', headers={"Content-Type": content_type})
    assert (reply.status, reply.error_code) == (415, "unsupported_media_type")
    # what to send instead: the header, by name, and its value
    assert "Content-Type: application/json" in reply.body["error"]["message"]
    assert content_type.split(";")[0] in reply.body["error"]["message"]
    assert reply.headers["Cache-Control"] == "no-store"
    assert table_snapshot() == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "APPLICATION/JSON"])
def test_json_with_parameters_or_any_case_is_json(api, content_type):
    reply = api.call("batch", name="orders", body={"count": 5}, headers={"Content-Type": content_type})
    assert reply.status == 200


def test_error_bodies_are_json_with_code_and_message(api):
    reply = api.call("batch", name="orders", raw_body="{")
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.headers["Cache-Control"] == "no-store"
    assert set(reply.body) == {"error"}
    assert set(reply.body["error"]) == {"code", "message"}
    assert json.dumps(reply.body)  # plain JSON, no stack trace objects


NAME_RULE = "counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', and not '.' or '..'"
KEY_RULE = "Idempotency-Key must be 1-128 printable ASCII characters without spaces"


@pytest.mark.parametrize(
    ("route", "kwargs", "code", "message"),
    [
        ("next-post", {"name": "a" * 129}, "invalid_name", NAME_RULE),
        ("next-get", {"name": "or ders"}, "invalid_name", NAME_RULE),
        ("batch", {"name": "orders$"}, "invalid_name", NAME_RULE),
        ("next-post", {"headers": {"Idempotency-Key": "has space"}}, "invalid_idempotency_key", KEY_RULE),
        ("batch", {"headers": {"idempotency-key": "x" * 129}}, "invalid_idempotency_key", KEY_RULE),
        ("batch", {"body": {"count": 0}}, "invalid_count", "count must be an integer from 1 to 1000000"),
        ("batch", {"body": {"count": "5"}}, "invalid_count", "count must be an integer from 1 to 1000000"),
        ("batch", {"body": {}}, "invalid_count", "count must be an integer from 1 to 1000000"),
        (
            "batch",
            {"body": {"count": 1000001}},
            "invalid_count",
            "count must be an integer from 1 to 1000000",
        ),
        (
            "batch",
            {"body": {"count": 5, "start": 1}},
            "invalid_body",
            "request body has an unknown field 'start'",
        ),
    ],
)
def test_validation_messages_speak_in_the_cores_voice(api, route, kwargs, code, message):
    """Every field the resolver validates (path name, Idempotency-Key, count)
    is refused in the same words as the core refuses it, not in pydantic's
    ("Input should be greater than or equal to 1")."""
    reply = api.call(route, **kwargs)
    assert (reply.status, reply.error_code, reply.body["error"]["message"]) == (400, code, message)
