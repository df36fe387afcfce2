"""The allocation record: every request handed IDs leaves exactly one log
line naming the IDs, the counter, the route, the caller, the key and whether
it was a replay; a request that fails leaves none. Read from what the
functions print, as CloudWatch Logs would receive it."""

from __future__ import annotations

import pytest

from idblocks_core.logic.allocation import ALLOCATION_RECORD
from idblocks_core.observability import logger
from tests.support.api import load_event
from tests.unit.test_replay import expire_key_records

KEY_K = {"Idempotency-Key": "k"}
ALICE = "iam:arn:aws:iam::123456789012:user/alice"  # the caller of events/*.json
FIELDS = {
    "counter",
    "first_id",
    "last_id",
    "count",
    "step",
    "route",
    "caller",
    "idempotency_key",
    "replayed",
    "served_from",
    "request_id",
    "dynamodb_calls",
    "dynamodb_ms",
}


def fields(record: dict, *names: str) -> tuple:
    return tuple(record[name] for name in names)


@pytest.fixture
def quiet(api, logged):
    """The functions' log output, as the Logger formats it for CloudWatch,
    into a buffer. Calling it returns the allocation records written since
    the last call (so a test calls it once after setting up)."""
    return lambda: [line for line in logged() if line.get("message") == ALLOCATION_RECORD]


def test_uncached_next_leaves_one_record_per_id(api, quiet):
    """Given a counter without a cache, when next is called twice, then two
    records, each naming its one ID, the route, the caller and the request,
    with no key and nothing replayed."""
    first = api.call("next-post", name="orders")
    second = api.call("next-post", name="orders")
    got = quiet()
    assert [r["first_id"] for r in got] == [first.body["id"], second.body["id"]] == [1, 2]
    for record in got:
        assert set(record) >= FIELDS
        assert record["last_id"] == record["first_id"]
        assert fields(record, "counter", "count", "step", "route") == ("orders", 1, 1, "next")
        assert record["caller"] == ALICE
        assert fields(record, "idempotency_key", "replayed", "served_from") == ("", False, "write")
        assert record["request_id"]
    assert got[0]["request_id"] != got[1]["request_id"]


def test_cached_next_leaves_one_record_per_id_served(api, quiet):
    """Given a counter with cache 5, when next is called four times, then
    four records: the first two IDs from writes (a first block of one ID,
    then one of five), the next two from memory, each naming only the ID it
    served."""
    assert api.call("admin-create", body={"name": "members", "cache": 5}).status == 201
    quiet()
    ids = [api.call("next-post", name="members").body["id"] for _ in range(4)]
    got = quiet()
    assert (
        [fields(r, "first_id", "last_id", "count") for r in got]
        == [(i, i, 1) for i in ids]
        == [
            (1, 1, 1),
            (2, 2, 1),
            (3, 3, 1),
            (4, 4, 1),
        ]
    )
    assert [r["served_from"] for r in got] == ["write", "write", "memory", "memory"]
    assert {(r["route"], r["replayed"]) for r in got} == {("next", False)}


def test_a_batch_leaves_one_record_of_its_block(api, quiet):
    reply = api.call("batch", name="orders", body={"count": 100})
    [record] = quiet()
    assert fields(record, "counter", "first_id", "last_id", "count", "step", "route") == (
        "orders",
        reply.body["start"],
        reply.body["end"],
        100,
        1,
        "batch",
    )
    assert fields(record, "idempotency_key", "replayed", "served_from") == ("", False, "write")


@pytest.mark.parametrize(
    ("event", "body"),
    [("batch", {"count": 10}), ("next-post", None)],
)
def test_a_keyed_request_and_its_replay_each_leave_one_record(api, quiet, event, body):
    """Given a keyed request, then its retry with the same key: two records
    of the same IDs, the first fresh and written, the second a replay
    answered from the idempotency record."""
    kwargs = {"name": "orders", "headers": {"Idempotency-Key": "run-7"}}
    if body is not None:
        kwargs["body"] = body
    first = api.call(event, **kwargs)
    again = api.call(event, **kwargs)
    assert first.status == again.status == 200
    assert again.body == first.body
    fresh, replay = quiet()
    assert fields(fresh, "first_id", "last_id") == fields(replay, "first_id", "last_id")
    assert fields(fresh, "idempotency_key", "replayed", "served_from") == ("run-7", False, "write")
    assert fields(replay, "idempotency_key", "replayed", "served_from") == (
        "run-7",
        True,
        "idempotency_record",
    )
    assert fresh["route"] == replay["route"] == event.removesuffix("-post")


def test_a_keyed_cached_next_served_from_memory_says_so(api, quiet):
    assert api.call("admin-create", body={"name": "members", "cache": 10}).status == 201
    api.call("next-post", name="members")
    api.call("next-post", name="members")  # a block of 2..9
    quiet()
    api.call("next-post", name="members", headers={"Idempotency-Key": "signup-1"})
    [record] = quiet()
    assert fields(record, "first_id", "idempotency_key") == (3, "signup-1")
    assert fields(record, "replayed", "served_from") == (False, "memory")


def test_a_retry_that_finds_its_own_committed_write_is_a_replay(api, dynamodb, quiet):
    """The block's write committed but its key record is gone: the retry
    finds the write by its token and repeats the block, marked a replay."""
    key = {"Idempotency-Key": "invoice-run-42"}
    first = api.call("batch", name="orders", body={"count": 5}, headers=key)
    expire_key_records(dynamodb)
    quiet()
    again = api.call("batch", name="orders", body={"count": 5}, headers=key)
    assert again.body == first.body
    [record] = quiet()
    assert fields(record, "first_id", "last_id", "replayed", "served_from") == (1, 5, True, "write")


def test_the_caller_is_who_api_gateway_authenticated(api, quiet):
    api.call("next-post", name="orders", identity={"userArn": None, "apiKeyId": "k-123"})
    [record] = quiet()
    assert record["caller"] == "apikey:k-123"


def test_regions_record_their_step(api, lambda_env, dynamodb, quiet):
    lambda_env(REGION_COUNT="3", REGION_INDEX="1")
    reply = api.call("batch", name="orders", body={"count": 4})
    [record] = quiet()
    assert fields(record, "first_id", "last_id", "count", "step") == (
        reply.body["start"],
        reply.body["end"],
        4,
        3,
    )


def test_the_record_is_keys_not_a_formatted_message(api, quiet):
    api.call("next-post", name="orders")
    [record] = quiet()
    assert record["message"] == ALLOCATION_RECORD == "allocation"
    assert record["level"] == "INFO"


@pytest.mark.parametrize(
    ("call", "status"),
    [
        (lambda api: api.call("batch", name="orders", body={"count": 0}), 400),
        (lambda api: api.call("next-post", name="bad name!"), 400),
        (lambda api: api.call("next-post", name="tiny"), 409),  # exhausted
        (lambda api: api.call("batch", name="orders", body={"count": 3}, headers=KEY_K), 422),
    ],
    ids=["bad-count", "bad-name", "exhausted", "key-reused-with-another-count"],
)
def test_a_request_that_fails_leaves_no_record(api, quiet, call, status):
    assert api.call("admin-create", body={"name": "tiny", "max": 1}).status == 201
    assert api.call("next-post", name="tiny").status == 200
    assert api.call("batch", name="orders", body={"count": 2}, headers=KEY_K).status == 200
    quiet()
    assert call(api).status == status
    assert quiet() == []


def test_an_unknown_counter_without_auto_create_leaves_no_record(api, lambda_env, quiet):
    lambda_env(AUTO_CREATE_COUNTERS="false")
    assert api.call("next-post", name="nobody").status == 404
    assert quiet() == []


def test_each_record_carries_its_requests_api_gateway_id_and_no_other(api, quiet):
    """Given two requests, the second with no request context, when both take
    IDs, then the first record's correlation id is API Gateway's request id
    and the second names none: never the request before it."""
    first = load_event("next-post")
    first["requestContext"]["requestId"] = "gateway-request-1"
    second = load_event("next-post")
    second["requestContext"]["requestId"] = None
    assert api.send(first).status == api.send(second).status == 200
    got = quiet()
    assert got[0]["correlation_id"] == "gateway-request-1"
    assert "correlation_id" not in got[1]


def test_a_message_is_logged_as_written_never_parsed_as_json(logged):
    """Given a message that happens to be JSON, when logged, then the line
    keeps it as the text it was (the Logger's default would parse it)."""
    logger.info('{"counter": "orders"}')
    (line,) = logged()
    assert line["message"] == '{"counter": "orders"}'
