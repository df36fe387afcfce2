"""The admin routes, through the admin handler, with events/admin-*.json."""

from __future__ import annotations

import pytest

from idblocks_core.domain.rules import DEFAULT_MAX_ID, LIMIT_MAX_ID
from tests.support.api import load_event

COUNTER_FIELDS = {"name", "next", "exhausted", "max", "step", "residue", "cache", "created_at", "updated_at"}
NAME_RULE = "counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', and not '.' or '..'"
ANY_ID = f"an integer from 1 to {LIMIT_MAX_ID}"


def test_create_returns_201_and_the_counter(api):
    reply = api.call("admin-create")  # {"name": "invoices", "start": 1000}
    assert reply.status == 201
    assert set(reply.body) == COUNTER_FIELDS
    assert (reply.body["name"], reply.body["next"], reply.body["max"]) == ("invoices", 1000, DEFAULT_MAX_ID)
    assert reply.body["created_at"].endswith("Z")
    assert api.call("next-post", name="invoices").body["id"] == 1000


def test_create_defaults_to_start_1(api):
    reply = api.call("admin-create", body={"name": "members"})
    assert (reply.body["next"], reply.body["max"]) == (1, DEFAULT_MAX_ID)


def test_create_accepts_the_64_bit_limit(api):
    reply = api.call("admin-create", body={"name": "big", "start": LIMIT_MAX_ID, "max": LIMIT_MAX_ID})
    assert reply.status == 201
    assert api.call("next-post", name="big").body["id"] == LIMIT_MAX_ID
    assert api.call("next-post", name="big").error_code == "counter_exhausted"


def test_create_twice_is_409(api, table_snapshot):
    api.call("admin-create")
    before = table_snapshot()
    reply = api.call("admin-create")
    assert (reply.status, reply.error_code) == (409, "counter_exists")
    assert table_snapshot() == before


def test_create_over_an_auto_created_counter_is_409(api):
    api.call("next-post", name="orders")
    assert api.call("admin-create", body={"name": "orders"}).status == 409


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid_name"),
        ({"name": ""}, "invalid_name"),
        ({"name": "a b"}, "invalid_name"),
        ({"name": 5}, "invalid_name"),
        ({"name": "x", "start": 0}, "invalid_start"),
        ({"name": "x", "start": -5}, "invalid_start"),
        ({"name": "x", "start": "1"}, "invalid_start"),
        ({"name": "x", "start": 1.5}, "invalid_start"),
        ({"name": "x", "start": LIMIT_MAX_ID + 1}, "invalid_start"),
        ({"name": "x", "max": 0}, "invalid_max"),
        ({"name": "x", "max": LIMIT_MAX_ID + 1}, "invalid_max"),
        ({"name": "x", "max": True}, "invalid_max"),
        ({"name": "x", "start": 10, "max": 9}, "invalid_start"),
        ({"name": "x", "next": 9}, "invalid_body"),
    ],
)
def test_bad_create_bodies_are_400_and_change_nothing(api, table_snapshot, body, code):
    before = table_snapshot()
    reply = api.call("admin-create", body=body)
    assert reply.status == 400, reply.body
    assert reply.error_code == code
    assert table_snapshot() == before


def test_get_returns_the_counter_and_its_next_id(api):
    api.call("admin-create")
    api.call("batch", name="invoices", body={"count": 10})
    reply = api.call("admin-get")
    assert reply.status == 200
    assert set(reply.body) == COUNTER_FIELDS
    assert reply.body["next"] == 1010
    assert reply.body["updated_at"] >= reply.body["created_at"]


def test_get_unknown_is_404_and_creates_nothing(api, table_snapshot):
    before = table_snapshot()
    reply = api.call("admin-get", name="nope")
    assert (reply.status, reply.error_code) == (404, "counter_not_found")
    assert table_snapshot() == before


def test_get_bad_name_is_400(api):
    assert api.call("admin-get", name="a" * 200).error_code == "invalid_name"


def test_list_pages_through_every_counter_once(api):
    names = {f"c{i:02}" for i in range(7)}
    for name in names:
        api.call("admin-create", body={"name": name})
    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": "3"} | ({"cursor": cursor} if cursor else {})
        reply = api.call("admin-list", query=query)
        assert reply.status == 200
        assert len(reply.body["counters"]) <= 3
        seen += [c["name"] for c in reply.body["counters"]]
        cursor = reply.body["cursor"]
        pages += 1
        if cursor is None:
            break
        assert pages < 10
    assert sorted(seen) == sorted(names)
    assert all(set(c) == COUNTER_FIELDS for c in reply.body["counters"])


def test_list_default_page_and_empty_table(api):
    reply = api.call("admin-list", query=None)
    assert reply.body == {"counters": [], "cursor": None}


def test_list_leaves_out_deleted_counters(api):
    for name in ("keep", "drop"):
        api.call("admin-create", body={"name": name})
    api.call("admin-delete", name="drop")
    reply = api.call("admin-list", query={"limit": "10"})
    assert [c["name"] for c in reply.body["counters"]] == ["keep"]


def test_list_with_deleted_true_shows_each_deleted_counter_and_the_mark_it_keeps(api):
    """What a recovery after a restore reads: a deleted counter's kept mark,
    which nothing else of the API shows (GET answers it 404)."""
    for name in ("keep", "drop"):
        api.call("admin-create", body={"name": name, "start": 100})
    api.call("batch", name="drop", body={"count": 5})  # 100..104
    api.call("admin-delete", name="drop")
    reply = api.call("admin-list", query={"limit": "10", "deleted": "true"})
    assert reply.status == 200
    assert reply.body["deleted"] is True
    listed = {c["name"]: c for c in reply.body["counters"]}
    assert set(listed["keep"]) == COUNTER_FIELDS
    assert listed["keep"]["next"] == 100
    assert set(listed["drop"]) == COUNTER_FIELDS | {"deleted"}
    assert (listed["drop"]["deleted"], listed["drop"]["next"]) == (True, 105)
    # A re-creation without start continues there.
    assert api.call("admin-create", body={"name": "drop"}).body["next"] == 105


def test_deleted_given_twice_in_the_query_is_400(api):
    event = load_event("admin-list")
    event["queryStringParameters"] = {"deleted": "true"}
    event["multiValueQueryStringParameters"] = {"deleted": ["true", "true"]}
    reply = api.send(event)
    assert (reply.status, reply.error_code) == (400, "invalid_deleted")


def test_list_without_deleted_true_says_nothing_of_deleted_counters(api):
    api.call("admin-create", body={"name": "drop"})
    api.call("admin-delete", name="drop")
    assert api.call("admin-list", query={"deleted": "false"}).body == {"counters": [], "cursor": None}


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"deleted": "yes"}, "invalid_deleted"),
        ({"deleted": "True"}, "invalid_deleted"),
        ({"deleted": "1"}, "invalid_deleted"),
        ({"deleted": ""}, "invalid_deleted"),
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": "1001"}, "invalid_limit"),
        ({"limit": "ten"}, "invalid_limit"),
        ({"limit": "-1"}, "invalid_limit"),
        ({"cursor": "not-a-cursor"}, "invalid_cursor"),
        ({"cursor": "eyJuYW1lIjoiYSBiIn0"}, "invalid_cursor"),  # {"name":"a b"}
        ({"cursor": "W10"}, "invalid_cursor"),  # []
        ({"cursor": "x" * 600}, "invalid_cursor"),
    ],
)
def test_bad_list_queries_are_400(api, query, code):
    reply = api.call("admin-list", query=query)
    assert reply.status == 400, reply.body
    assert reply.error_code == code


def test_set_moves_the_counter_forward(api):
    api.call("admin-create")
    reply = api.call("admin-set")  # {"next": 5000}
    assert (reply.status, reply.body["next"]) == (200, 5000)
    assert api.call("next-post", name="invoices").body["id"] == 5000


def test_set_to_the_current_next_is_a_no_op(api):
    api.call("admin-create")
    reply = api.call("admin-set", body={"next": 1000})
    assert (reply.status, reply.body["next"]) == (200, 1000)


def test_set_backwards_is_409_and_changes_nothing(api, table_snapshot):
    api.call("admin-create")
    api.call("batch", name="invoices", body={"count": 10})
    before = table_snapshot()
    reply = api.call("admin-set", body={"next": 1009})
    assert (reply.status, reply.error_code) == (409, "counter_would_move_back")
    assert table_snapshot() == before
    assert api.call("next-post", name="invoices").body["id"] == 1010


def test_set_to_max_plus_one_exhausts_and_beyond_is_409(api):
    api.call("admin-create", body={"name": "small", "max": 100})
    assert api.call("admin-set", name="small", body={"next": 102}).error_code == "next_beyond_max"
    assert api.call("admin-set", name="small", body={"next": 101}).status == 200
    assert api.call("next-post", name="small").error_code == "counter_exhausted"


def test_set_unknown_is_404_and_creates_nothing(api, table_snapshot):
    before = table_snapshot()
    reply = api.call("admin-set", name="nope")
    assert (reply.status, reply.error_code) == (404, "counter_not_found")
    assert table_snapshot() == before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid_body"),
        ({"next": 0}, "invalid_next"),
        ({"cache": 0}, "invalid_cache"),
        ({"cache": 1_000_001}, "invalid_cache"),
        ({"cache": "5"}, "invalid_cache"),
        ({"next": 5000, "cache": 0}, "invalid_cache"),
        ({"next": "5"}, "invalid_next"),
        ({"next": LIMIT_MAX_ID + 2}, "invalid_next"),
        ({"next": 5, "max": 9}, "invalid_body"),
        ({"next": 5, "deleted": "true"}, "invalid_deleted"),
        ({"next": 5, "deleted": 1}, "invalid_deleted"),
    ],
)
def test_bad_set_bodies_are_400(api, table_snapshot, body, code):
    api.call("admin-create")
    before = table_snapshot()
    reply = api.call("admin-set", body=body)
    assert (reply.status, reply.error_code) == (400, code)
    assert table_snapshot() == before


def test_delete_is_204_then_the_counter_is_gone(api):
    api.call("admin-create")
    reply = api.call("admin-delete")
    assert (reply.status, reply.body) == (204, None)
    assert api.call("admin-get").status == 404
    assert api.call("admin-delete").status == 404
    assert api.call("admin-set").status == 404


def test_set_on_a_deleted_counter_raises_the_mark_it_keeps_and_it_stays_deleted(api, lambda_env):
    lambda_env(AUTO_CREATE_COUNTERS="false")
    api.call("admin-create")  # starts at 1000
    api.call("batch", name="invoices", body={"count": 10})  # 1000..1009
    api.call("admin-delete")
    # Without deleted, as ever: not found, and nothing written
    assert api.call("admin-set", body={"next": 5000}).error_code == "counter_not_found"
    reply = api.call("admin-set", body={"next": 5000, "deleted": True})
    assert reply.status == 200
    assert (reply.body["deleted"], reply.body["next"]) == (True, 5000)
    assert api.call("admin-get").status == 404
    assert api.call("batch", name="invoices", body={"count": 1}).status == 404
    assert (
        api.call("admin-create", body={"name": "invoices", "start": 4999}).error_code
        == "below_high_water_mark"
    )
    assert api.call("admin-create", body={"name": "invoices"}).body["next"] == 5000


def test_a_deleted_counters_mark_may_pass_its_max(api):
    """A deleted counter hands out nothing: its max, which a re-creation
    gives anew, does not bound the mark."""
    api.call("admin-create", body={"name": "invoices", "max": 10})
    api.call("admin-delete")
    assert api.call("admin-set", body={"next": 500, "deleted": True}).body["next"] == 500
    revived = api.call("admin-create", body={"name": "invoices"}).body
    assert (revived["next"], revived["max"]) == (500, DEFAULT_MAX_ID)


def test_set_below_a_deleted_counters_mark_is_409_and_changes_nothing(api, table_snapshot):
    api.call("admin-create")  # starts at 1000
    api.call("admin-delete")
    before = table_snapshot()
    reply = api.call("admin-set", body={"next": 999, "deleted": True})
    assert (reply.status, reply.error_code) == (409, "counter_would_move_back")
    assert "next is 1000" in reply.body["error"]["message"]
    assert table_snapshot() == before


def test_set_of_cache_on_a_deleted_counter_is_404_and_changes_nothing(api, table_snapshot):
    api.call("admin-create")
    api.call("admin-delete")
    before = table_snapshot()
    for body in ({"cache": 5, "deleted": True}, {"next": 5000, "cache": 5, "deleted": True}):
        assert api.call("admin-set", body=body).error_code == "counter_not_found"
    assert table_snapshot() == before


def test_set_with_deleted_moves_a_live_counter_as_without_it(api):
    api.call("admin-create")  # starts at 1000
    reply = api.call("admin-set", body={"next": 5000, "deleted": True})
    assert (reply.status, reply.body["next"]) == (200, 5000)
    assert "deleted" not in reply.body
    assert api.call("next-post", name="invoices").body["id"] == 5000


def test_delete_unknown_is_404(api):
    assert api.call("admin-delete", name="nope").error_code == "counter_not_found"


def test_deleted_counter_never_hands_out_an_id_twice(api, lambda_env):
    api.call("admin-create")  # starts at 1000
    handed_out = api.call("batch", name="invoices", body={"count": 50}).body["end"]  # 1049
    api.call("admin-delete")

    # a create without start resumes after the high-water mark
    assert api.call("admin-create", body={"name": "invoices"}).body["next"] == handed_out + 1
    assert api.call("next-post", name="invoices").body["id"] == handed_out + 1
    api.call("admin-delete")

    # a create whose start or max falls at or below it is refused
    low = api.call("admin-create", body={"name": "invoices", "start": 1})
    assert (low.status, low.error_code) == (409, "below_high_water_mark")
    assert str(handed_out + 1) in low.body["error"]["message"]
    assert api.call("admin-create", body={"name": "invoices", "max": handed_out}).status == 409

    # a start above it is honoured
    assert api.call("admin-create", body={"name": "invoices", "start": 5000}).body["next"] == 5000


def test_a_counter_set_forward_then_deleted_is_not_said_to_have_handed_out_ids(api, table_snapshot):
    """`idblocks set NAME 5000`, `delete`, `create NAME --start 1000` said the
    counter "was deleted after handing out IDs up to 4999": it had handed
    out none; set had moved its high-water mark. The item does not record
    which IDs were handed out, so the message names the mark and says
    neither."""
    api.call("admin-create", body={"name": "invoices"})
    api.call("admin-set")  # {"next": 5000}
    api.call("admin-delete")
    before = table_snapshot()
    low = api.call("admin-create", body={"name": "invoices", "start": 1000})
    assert (low.status, low.error_code) == (409, "below_high_water_mark")
    message = low.body["error"]["message"]
    assert "handing out" not in message
    assert message.startswith("counter 'invoices' was deleted with its high-water mark at 4999 ")
    assert message.endswith("; start must be above 4999, not 1000")
    assert table_snapshot() == before


def test_deleted_counter_is_404_for_next_when_auto_create_is_off(api, lambda_env):
    api.call("admin-create")
    api.call("admin-delete")
    lambda_env(AUTO_CREATE_COUNTERS="false")
    assert api.call("next-post", name="invoices").error_code == "counter_not_found"


@pytest.mark.parametrize(
    ("event_name", "kwargs", "code", "message"),
    [
        ("admin-get", {"name": "a b"}, "invalid_name", NAME_RULE),
        ("admin-delete", {"name": "a" * 129}, "invalid_name", NAME_RULE),
        ("admin-create", {"body": {}}, "invalid_name", NAME_RULE),
        ("admin-create", {"body": {"name": 5}}, "invalid_name", NAME_RULE),
        ("admin-create", {"body": {"name": "x", "start": 0}}, "invalid_start", f"start must be {ANY_ID}"),
        ("admin-create", {"body": {"name": "x", "start": "1"}}, "invalid_start", f"start must be {ANY_ID}"),
        ("admin-create", {"body": {"name": "x", "max": True}}, "invalid_max", f"max must be {ANY_ID}"),
        ("admin-set", {"body": {}}, "invalid_body", "request body must give next, cache or both"),
        (
            "admin-set",
            {"body": {"cache": 0}},
            "invalid_cache",
            "cache must be an integer from 1 to 1,000,000",
        ),
        (
            "admin-create",
            {"body": {"name": "x", "cache": True}},
            "invalid_cache",
            "cache must be an integer from 1 to 1,000,000",
        ),
        (
            "admin-set",
            {"body": {"next": 0}},
            "invalid_next",
            f"next must be an integer from 1 to {LIMIT_MAX_ID + 1}",
        ),
        (
            "admin-set",
            {"body": {"next": 5, "max": 9}},
            "invalid_body",
            "request body has an unknown field 'max'",
        ),
        ("admin-list", {"query": {"limit": "0"}}, "invalid_limit", "limit must be an integer from 1 to 1000"),
        (
            "admin-list",
            {"query": {"limit": "ten"}},
            "invalid_limit",
            "limit must be an integer from 1 to 1000",
        ),
        (
            "admin-list",
            {"query": {"cursor": "x" * 600}},
            "invalid_cursor",
            "cursor is not one this API returned",
        ),
    ],
)
def test_validation_messages_speak_in_the_cores_voice(api, event_name, kwargs, code, message):
    """The path name, body fields and the list query are refused in the core's
    words ("limit must be an integer from 1 to 1000"), whether the resolver's
    validation or the core caught them, never in pydantic's."""
    reply = api.call(event_name, **kwargs)
    assert (reply.status, reply.error_code, reply.body["error"]["message"]) == (400, code, message)


def test_a_counter_used_up_at_the_64_bit_limit_reports_no_number_beyond_it(api):
    """A counter whose max is 2^63-1 and which has handed it out used to
    report "next": 2^63, a number outside the API's integers (int64). Its state
    now says exhausted, with no next ID, in every answer that shows it."""
    api.call("admin-create", body={"name": "last", "start": LIMIT_MAX_ID, "max": LIMIT_MAX_ID})
    assert api.call("next-post", name="last").body["id"] == LIMIT_MAX_ID
    read = api.call("admin-get", name="last").body
    listed = next(c for c in api.call("admin-list", query={}).body["counters"] if c["name"] == "last")
    for state in (read, listed):
        assert (state["next"], state["exhausted"], state["max"]) == (None, True, LIMIT_MAX_ID)
    assert api.call("next-post", name="last").error_code == "counter_exhausted"


def test_exhausted_is_shown_whenever_no_id_is_left(api):
    """Set to max + 1, a counter is exhausted: next is null, not max + 1;
    a counter with IDs left shows its next and exhausted false."""
    created = api.call("admin-create", body={"name": "small", "max": 100}).body
    assert (created["next"], created["exhausted"]) == (1, False)
    moved = api.call("admin-set", name="small", body={"next": 101}).body
    assert (moved["next"], moved["exhausted"], moved["max"]) == (None, True, 100)


def test_reading_a_counter_that_does_not_exist_says_how_to_create_it(api):
    """A name beginning with "-" is given after "--", where the command
    line reads it as a name, not an option."""
    for name, command in (("members", "idblocks create members"), ("-x", "idblocks create -- -x")):
        reply = api.call("admin-get", name=name)
        assert (reply.status, reply.error_code) == (404, "counter_not_found")
        assert reply.body["error"]["message"] == (
            f"counter '{name}' does not exist: create it with `{command}` (POST /admin/counters)"
        )
