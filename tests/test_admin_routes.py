"""The admin routes, through the admin handler, with events/admin-*.json."""

from __future__ import annotations

import pytest

from idblocks_core.rules import DEFAULT_MAX_ID, LIMIT_MAX_ID

COUNTER_FIELDS = {"name", "next", "exhausted", "max", "created_at", "updated_at"}


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


@pytest.mark.parametrize(
    ("query", "code"),
    [
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
        ({}, "invalid_next"),
        ({"next": 0}, "invalid_next"),
        ({"next": "5"}, "invalid_next"),
        ({"next": LIMIT_MAX_ID + 2}, "invalid_next"),
        ({"next": 5, "max": 9}, "invalid_body"),
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


def test_delete_unknown_is_404(api):
    assert api.call("admin-delete", name="nope").error_code == "counter_not_found"


def test_deleted_counter_never_hands_out_an_id_twice(api, lambda_env):
    api.call("admin-create")  # starts at 1000
    handed_out = api.call("batch", name="invoices", body={"count": 50}).body["end"]  # 1049
    api.call("admin-delete")

    # auto-create, by next, resumes after the high-water mark
    assert api.call("next-post", name="invoices").body["id"] == handed_out + 1
    api.call("admin-delete")

    # so does a create without start
    assert api.call("admin-create", body={"name": "invoices"}).body["next"] == handed_out + 2
    api.call("admin-delete")

    # a create whose start or max falls at or below it is refused
    low = api.call("admin-create", body={"name": "invoices", "start": 1})
    assert (low.status, low.error_code) == (409, "below_high_water_mark")
    assert str(handed_out + 1) in low.body["error"]["message"]
    assert api.call("admin-create", body={"name": "invoices", "max": handed_out}).status == 409

    # a start above it is honoured
    assert api.call("admin-create", body={"name": "invoices", "start": 5000}).body["next"] == 5000


def test_deleted_counter_is_404_for_next_when_auto_create_is_off(api, lambda_env):
    api.call("admin-create")
    api.call("admin-delete")
    lambda_env(AUTO_CREATE_COUNTERS="false")
    assert api.call("next-post", name="invoices").error_code == "counter_not_found"
