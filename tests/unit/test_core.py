"""The core (idblocks_core) without HTTP: rules, store and counters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ReadTimeoutError

from idblocks_core.core import Core
from idblocks_core.core import core as current_core
from idblocks_core.dal.counter_store import CounterStore, StaleToken, decode_cursor, encode_cursor
from idblocks_core.domain import errors, rules
from idblocks_core.domain.model import Block
from tests.conftest import TABLE_NAMES

WINDOW = timedelta(hours=1)


@pytest.fixture
def store(dynamodb):
    return CounterStore(TABLE_NAMES["CountersTable"])


@pytest.fixture
def core(dynamodb) -> Core:
    return current_core()


def item(dynamodb, name):
    return dynamodb.get_item(TableName=TABLE_NAMES["CountersTable"], Key={"name": {"S": name}})["Item"]


# -- rules -------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [1]])
def test_only_real_integers_count(value):
    with pytest.raises(errors.InvalidInput):
        rules.check_count(value, 10)


def test_count_bounds():
    assert rules.check_count(1, 10) == 1
    assert rules.check_count(10, 10) == 10
    for bad in (0, 11, -1):
        with pytest.raises(errors.InvalidInput, match="1 to 10"):
            rules.check_count(bad, 10)


def test_new_counter_defaults_and_bounds():
    assert rules.check_new_counter(None, None) == (None, rules.DEFAULT_MAX_ID)
    assert rules.check_new_counter(5, 5) == (5, 5)
    with pytest.raises(errors.InvalidInput, match="above max"):
        rules.check_new_counter(6, 5)
    with pytest.raises(errors.InvalidInput):
        rules.check_new_counter(None, rules.LIMIT_MAX_ID + 1)


def test_block_count_is_inclusive():
    assert Block(5, 5).count == 1
    assert Block(1, 100).count == 100


# -- store: one conditional write per allocation -----------------------------


def test_allocation_is_one_conditional_update(store, core, monkeypatch):
    core.admin.create("orders")
    calls = []
    real = store.client.update_item

    def spy(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(store.client, "update_item", spy)
    monkeypatch.setattr(store.client, "get_item", lambda **_: pytest.fail("allocation must not read first"))
    assert store.reserve_block("orders", 10, "t1", WINDOW) == Block(1, 10)
    (call,) = calls
    assert call["UpdateExpression"].startswith("ADD #hwm :span, #room :minus_span")
    assert "#room >= :span" in call["ConditionExpression"]


def test_room_tracks_max_minus_hwm(store, core, dynamodb):
    core.admin.create("orders", start=11, max_id=100)
    store.reserve_block("orders", 30, "t1", WINDOW)
    stored = item(dynamodb, "orders")
    assert int(stored["hwm"]["N"]) == 40
    assert int(stored["room"]["N"]) == 100 - 40
    core.admin.set_next("orders", 91)
    stored = item(dynamodb, "orders")
    assert (int(stored["hwm"]["N"]), int(stored["room"]["N"])) == (90, 10)


def test_a_retried_write_returns_the_block_it_took(store, core):
    # botocore resends the same request when a response is lost; the second
    # send finds the first one's token and answers with its block
    core.admin.create("orders")
    first = store.reserve_block("orders", 10, "token-a", WINDOW)
    again = store.reserve_block("orders", 10, "token-a", WINDOW)
    assert first == again == Block(1, 10)
    assert store.reserve_block("orders", 1, "token-b", WINDOW) == Block(11, 11)


def test_a_token_is_only_recognised_while_nothing_else_wrote(store, core):
    core.admin.create("orders")
    store.reserve_block("orders", 10, "token-a", WINDOW)
    store.reserve_block("orders", 5, "token-b", WINDOW)
    # token-a's write is no longer the last: a resend takes a new block
    assert store.reserve_block("orders", 10, "token-a", WINDOW) == Block(16, 25)


def test_an_old_token_is_not_replayed(store, core):
    core.admin.create("orders")
    store.reserve_block("orders", 10, "token-a", WINDOW)
    with pytest.raises(StaleToken):
        store.reserve_block("orders", 10, "token-a", timedelta(0))


def test_counters_draw_a_fresh_token_for_a_stale_one(core):
    first = core.allocator.take_block("orders", 3, token="token-a")
    core.allocator.replay_window = timedelta(0)
    assert core.allocator.take_block("orders", 3, token="token-a") == Block(first.end + 1, first.end + 3)


def test_failed_conditions_leave_the_item_alone(store, core, dynamodb):
    core.admin.create("orders", max_id=5)
    store.reserve_block("orders", 5, "t1", WINDOW)
    before = item(dynamodb, "orders")
    with pytest.raises(errors.CounterExhausted):
        store.reserve_block("orders", 1, "t2", WINDOW)
    with pytest.raises(errors.CounterWouldMoveBack):
        store.set_next("orders", 2)
    assert item(dynamodb, "orders") == before


def test_revive_refuses_when_the_high_water_mark_moved(store, core):
    core.admin.create("orders")
    store.reserve_block("orders", 10, "t1", WINDOW)
    store.delete("orders")
    with pytest.raises(errors.CounterExists):
        store.revive("orders", seen_hwm=3, first_id=4, max_id=100)  # it is 10, not 3
    assert store.revive("orders", seen_hwm=10, first_id=11, max_id=100).next == 11


def test_an_admins_revive_keeps_an_exhausted_counter_exhausted(core):
    core.admin.create("big", start=rules.LIMIT_MAX_ID, max_id=rules.LIMIT_MAX_ID)
    core.allocator.take_block("big", 1)
    core.admin.delete("big")
    with pytest.raises(errors.BelowHighWaterMark):
        core.admin.create("big", max_id=rules.LIMIT_MAX_ID)


def test_allocation_never_brings_a_deleted_counter_back(core, store):
    """Given auto-create on and a counter an admin deleted, when a client
    takes IDs of it, then it is refused as not found and stays deleted: on
    main, take_block revived it (finding: a deleted counter came back when a
    client called next)."""
    assert core.allocator.auto_create
    core.admin.create("orders")
    core.allocator.take_block("orders", 3)
    core.admin.delete("orders")
    with pytest.raises(errors.CounterNotFound):
        core.allocator.take_block("orders", 1)
    with pytest.raises(errors.CounterNotFound):
        core.allocator.take_block("orders", 5, cached_next=True)
    with pytest.raises(errors.CounterNotFound):
        core.admin.get("orders")


def test_concurrent_create_during_auto_create_is_harmless(core, store, monkeypatch):
    real_create = store.create

    def someone_else_created_first(name, first_id, max_id):
        real_create(name, first_id, max_id)
        raise errors.CounterExists(name)

    monkeypatch.setattr(core.store, "create", someone_else_created_first)
    assert core.allocator.take_block("orders", 2) == Block(1, 2)


def test_a_counter_re_created_while_its_kept_mark_is_raised_is_moved_as_a_live_one(store, monkeypatch):
    """PUT next found the counter deleted; before its kept mark was raised,
    an operator's create brought it back: the mark is raised on the live
    counter, within its max and region, not written over its new state."""
    store.create("orders", 1, 100)
    store.delete("orders")
    real_raise = store.raise_kept_mark

    def revived_first(name, next_id):
        store.revive(name, 0, 1, 100)
        return real_raise(name, next_id)

    monkeypatch.setattr(store, "raise_kept_mark", revived_first)
    moved = store.update("orders", next_id=50, deleted=True)
    assert (moved.deleted, moved.next, moved.max) == (False, 50, 100)
    with pytest.raises(errors.NextBeyondMax):
        store.update("orders", next_id=500)


def test_a_counter_deleted_and_re_created_under_every_admin_write_is_a_retryable_503(
    dynamodb, store, monkeypatch
):
    """PUT next with deleted, while a delete and a create of the same name
    alternate faster than its writes: each live write finds it deleted, each
    raise of the kept mark finds it live again. After its rounds it is
    ServiceUnavailable (retry), and neither write moved the counter to 50."""
    store.create("orders", 1, 100)
    store.delete("orders")
    real_live, real_raise = store._update_live, store.raise_kept_mark

    def deleted_first(name, **kwargs):
        if "deleted_at" not in item(dynamodb, name):
            store.delete(name)
        return real_live(name, **kwargs)

    def revived_first(name, next_id):
        store.revive(name, 0, 1, 100)
        return real_raise(name, next_id)

    monkeypatch.setattr(store, "_update_live", deleted_first)
    monkeypatch.setattr(store, "raise_kept_mark", revived_first)
    with pytest.raises(errors.ServiceUnavailable, match="deleted and re-created under every try"):
        store.update("orders", next_id=50, deleted=True)
    monkeypatch.undo()
    assert store.get("orders").next == 1


def test_cursor_round_trip():
    key = {"name": {"S": "orders.2026"}}
    assert decode_cursor(encode_cursor(key)) == key


@pytest.mark.parametrize(
    "cursor", ["", "%%%", "bm90IGpzb24", "eyJuYW1lIjoxfQ", "eyJuYW1lIjoiYSIsIngiOjF9", "é"]
)
def test_forged_cursors_are_invalid_input(cursor):
    with pytest.raises(errors.InvalidInput) as raised:
        decode_cursor(cursor)
    assert raised.value.code == "invalid_cursor"


# -- a gap's explanation -------------------------------------------------------


def unanswered(store, monkeypatch, *between):
    """The store's next UpdateItems are applied but their answers never come
    (read timeouts), one for each of ``between``, which runs after its
    attempt is applied (None: nothing in between); the next is answered."""
    update_item = store.client.update_item
    calls = []

    def lose(**kwargs):
        calls.append(kwargs)
        answer = update_item(**kwargs)
        if len(calls) <= len(between):
            if between[len(calls) - 1] is not None:
                between[len(calls) - 1]()
            raise ReadTimeoutError(endpoint_url="http://dynamodb.test")
        return answer

    monkeypatch.setattr(store.client, "update_item", lose)
    return calls


def gap_lines(logged):
    return [line for line in logged() if line["message"].startswith("possible gap")]


def test_a_write_whose_answer_was_lost_and_then_overtaken_leaves_a_logged_gap(
    store, core, monkeypatch, logged
):
    """The first attempt takes 1..10 and its answer is lost; another
    allocation takes 11..15 before the retry, which finds another token and
    takes 16..25. Nobody holds 1..10: the store cannot know it, only that it
    may be so, and says so with the counter and how many IDs."""
    core.admin.create("orders")
    calls = unanswered(store, monkeypatch, lambda: core.allocator.take_block("orders", 5))
    assert store.reserve_block("orders", 10, "token-a", WINDOW) == Block(16, 25)
    assert len(calls) == 2
    (line,) = gap_lines(logged)
    assert (line["counter"], line["ids"], line["below"]) == ("orders", 10, 16)


def test_a_write_whose_answer_was_lost_and_found_again_leaves_no_gap(store, core, monkeypatch, logged):
    core.admin.create("orders")
    unanswered(store, monkeypatch, None)
    block = store.reserve_block("orders", 10, "token-a", WINDOW)
    assert (block, block.replayed) == (Block(1, 10), True)
    assert gap_lines(logged) == []


def test_a_replayed_block_still_logs_the_overtaken_attempt_before_it(store, core, monkeypatch, logged):
    """Attempt one takes 1..10, unanswered, and is overtaken (11..15); attempt
    two takes 16..25, unanswered, and is not; attempt three finds its token
    and answers 16..25. Nobody holds 1..10, though the answer is a replay."""
    core.admin.create("orders")
    unanswered(store, monkeypatch, lambda: core.allocator.take_block("orders", 5), None)
    block = store.reserve_block("orders", 10, "token-a", WINDOW)
    assert (block, block.replayed) == (Block(16, 25), True)
    (line,) = gap_lines(logged)
    assert (line["counter"], line["ids"], line["below"]) == ("orders", 10, 16)


def test_a_write_answered_at_once_logs_no_gap(store, core, logged):
    core.admin.create("orders")
    assert store.reserve_block("orders", 10, "token-a", WINDOW) == Block(1, 10)
    assert gap_lines(logged) == []
