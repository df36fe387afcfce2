"""Several regions, one stride scheme: a deployment with RegionCount K and
RegionIndex i hands out only IDs congruent to i modulo K, from counters
created with the same K and i, and refuses the others with a 409."""

from __future__ import annotations

import os

import pytest

from idblocks_core.core import build_core
from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.domain import errors
from idblocks_core.domain.model import Block
from idblocks_core.domain.rules import first_in_residue
from idblocks_core.settings import ConfigurationError
from tests.conftest import TABLE_NAMES
from tests.unit.test_core import WINDOW, item


def region(lambda_env, count, index):
    lambda_env(REGION_COUNT=str(count), REGION_INDEX=str(index))


@pytest.mark.parametrize(("index", "first"), [(0, 3), (1, 1), (2, 2)])
def test_batch_hands_out_stepped_blocks_in_its_residue(api, lambda_env, index, first):
    """Region i of 3 starts at the first ID congruent to i, batch answers the
    step, and consecutive requests continue the same residue without a gap."""
    region(lambda_env, 3, index)
    one = api.call("batch", name="orders", body={"count": 4})
    assert one.status == 200, one.body
    assert one.body == {"counter": "orders", "start": first, "end": first + 9, "count": 4, "step": 3}
    assert api.call("next-post", name="orders").body == {"counter": "orders", "id": first + 12}
    two = api.call("batch", name="orders", body={"count": 2}).body
    assert (two["start"], two["end"], two["step"]) == (first + 15, first + 18, 3)


def test_a_single_region_is_as_before(api):
    """K = 1 (the template's default): consecutive IDs from 1, step 1."""
    assert api.call("batch", name="orders", body={"count": 3}).body == {
        "counter": "orders",
        "start": 1,
        "end": 3,
        "count": 3,
        "step": 1,
    }
    state = api.call("admin-get", name="orders").body
    assert (state["next"], state["step"], state["residue"]) == (4, 1, 0)


def test_max_and_exhaustion_hold_in_id_terms(api, lambda_env, table_snapshot):
    """Region 2 of 3 under max 11 owns 2, 5, 8, 11: a block of 5 is refused
    without a change, a block of 4 ends exactly at max, and then nothing is left."""
    region(lambda_env, 3, 2)
    assert api.call("admin-create", body={"name": "small", "max": 11}).status == 201
    before = table_snapshot()
    too_many = api.call("batch", name="small", body={"count": 5})
    assert (too_many.status, too_many.error_code) == (409, "counter_exhausted")
    assert "next is 2, max is 11, 4 left" in too_many.body["error"]["message"]
    assert table_snapshot() == before
    block = api.call("batch", name="small", body={"count": 4}).body
    assert (block["start"], block["end"]) == (2, 11)
    assert api.call("next-post", name="small").error_code == "counter_exhausted"
    state = api.call("admin-get", name="small").body
    assert (state["exhausted"], state["next"]) == (True, None)


def test_a_counter_of_another_region_count_is_refused(api, lambda_env, table_snapshot):
    """A counter created under K = 1 must not be drawn from by a function
    configured with K = 3 (nor the other way round): 409 region_mismatch,
    nothing written, and the admin GET shows the counter's step and residue."""
    api.call("admin-create", body={"name": "invoices", "start": 1000})
    region(lambda_env, 3, 1)
    before = table_snapshot()
    for route, body in (("batch", {"count": 2}), ("next-post", None)):
        reply = api.call(route, name="invoices", body=body)
        assert (reply.status, reply.error_code) == (409, "region_mismatch")
        assert "RegionCount 1" in reply.body["error"]["message"]
    moved = api.call("admin-set", name="invoices", body={"next": 5000})
    assert (moved.status, moved.error_code) == (409, "region_mismatch")
    assert table_snapshot() == before
    state = api.call("admin-get", name="invoices").body
    assert (state["step"], state["residue"], state["next"]) == (1, 0, 1000)

    api.call("admin-create", body={"name": "members"})
    region(lambda_env, 1, 0)
    assert api.call("next-post", name="members").error_code == "region_mismatch"
    region(lambda_env, 3, 2)
    assert api.call("next-post", name="members").error_code == "region_mismatch"
    region(lambda_env, 3, 1)
    assert api.call("next-post", name="members").body["id"] == 1


def test_items_from_before_regions_belong_to_the_single_region(dynamodb, lambda_env):
    """An item without step and residue allocates as before under K = 1 and
    is refused under K = 3."""
    table = TABLE_NAMES["CountersTable"]
    now = {"S": "2026-01-01T00:00:00.000Z"}
    dynamodb.put_item(
        TableName=table,
        Item={
            "name": {"S": "old"},
            "hwm": {"N": "41"},
            "room": {"N": str(100 - 41)},
            "max_id": {"N": "100"},
            "created_at": now,
            "updated_at": now,
        },
    )
    assert CounterStore(table).reserve_block("old", 2, "t1", WINDOW) == Block(42, 43)
    with pytest.raises(errors.RegionMismatch):
        CounterStore(table, step=3, residue=0).reserve_block("old", 2, "t2", WINDOW)
    assert item(dynamodb, "old")["hwm"] == {"N": "43"}


def test_a_replayed_write_answers_its_stepped_block(dynamodb):
    """A retried write finds its own token and answers the same stepped block."""
    store = CounterStore(TABLE_NAMES["CountersTable"], step=4, residue=3)
    store.create("orders", 1, 1000)
    first = store.reserve_block("orders", 5, "t1", WINDOW)
    again = store.reserve_block("orders", 5, "t1", WINDOW)
    assert first == again == Block(3, 19, step=4)
    assert again.replayed
    assert again.count == 5


def test_growing_the_region_count_moves_to_a_new_residue_space(api, lambda_env):
    """Going from 1 region to 3 reissues nothing: delete the counter, and each
    new region re-creates it with a start above every region's high-water mark."""
    api.call("batch", name="orders", body={"count": 10})  # 1..10 under K = 1
    assert api.call("admin-delete", name="orders").status == 204
    region(lambda_env, 3, 1)
    revived = api.call("admin-create", body={"name": "orders", "start": 100})
    assert revived.status == 201, revived.body
    assert (revived.body["step"], revived.body["residue"], revived.body["next"]) == (3, 1, 100)
    assert api.call("batch", name="orders", body={"count": 3}).body["start"] == 100
    assert api.call("next-post", name="orders").body["id"] == 109
    region(lambda_env, 1, 0)
    assert api.call("next-post", name="orders").error_code == "region_mismatch"


def test_set_next_moves_to_the_first_id_of_the_residue(api, lambda_env):
    """PUT next=50 in region 1 of 3 moves to 52, the first ID of residue 1 from 50."""
    region(lambda_env, 3, 1)
    api.call("admin-create", body={"name": "invoices"})
    assert api.call("admin-set", name="invoices", body={"next": 50}).body["next"] == 52
    assert api.call("next-post", name="invoices").body["id"] == 52


@pytest.mark.parametrize(("count", "index"), [("3", "3"), ("1", "1"), ("0", "0"), ("3", "-1")])
def test_an_index_outside_the_region_count_is_a_configuration_error(lambda_env, count, index):
    """RegionIndex K of K would hand out region 0's residue: refused at start."""
    env = dict(os.environ, REGION_COUNT=count, REGION_INDEX=index)
    with pytest.raises(ConfigurationError, match="REGION_"):
        build_core(env)


def test_first_in_residue():
    assert [first_in_residue(n, 3, 1) for n in range(1, 8)] == [1, 4, 4, 4, 7, 7, 7]
    assert [first_in_residue(n, 1, 0) for n in (1, 5, 2**63 - 1)] == [1, 5, 2**63 - 1]
