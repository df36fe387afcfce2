"""DynamoDB throttling and outages become 503 with Retry-After; a broken
deployment becomes a plain 500. Never a stack trace in the response."""

from __future__ import annotations

import re
import time

import botocore
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError, ReadTimeoutError
from botocore.stub import Stubber

from idblocks_core.core import core
from idblocks_core.dal import dynamodb as dynamodb_calls
from idblocks_core.domain.errors import IdBlocksError

THROTTLING = ["ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"]
RETRYABLE = [*THROTTLING, "InternalServerError"]


@pytest.fixture(autouse=True)
def backoff_sleeps(monkeypatch):
    """The store's backoff between attempts, recorded instead of slept: these
    tests are about the answer, and real sleeps made them the slowest unit
    tests. The deadline tests (tests/integration) keep the real clock."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def assert_clean_503(reply):
    assert reply.status == 503
    assert reply.error_code == "service_unavailable"
    assert int(reply.headers["Retry-After"]) >= 1
    assert "Traceback" not in reply.raw["body"]


@pytest.mark.parametrize("code", RETRYABLE)
@pytest.mark.parametrize("route", ["next-post", "batch", "admin-create", "admin-get", "admin-list"])
def test_throttling_after_botocore_retries_is_503(api, code, route, backoff_sleeps):
    """Given DynamoDB refusing every attempt with a throttling or 5xx code,
    when a route is called, then it answers a clean 503 after backing off."""
    operation = {"admin-get": "get_item", "admin-list": "scan"}.get(route, "update_item")
    attempts = dynamodb_calls.THROTTLED_ATTEMPTS if code in THROTTLING else dynamodb_calls.MAX_ATTEMPTS
    with Stubber(core().store.client) as stub:
        for _ in range(attempts):
            stub.add_client_error(operation, service_error_code=code, http_status_code=400)
        reply = api.call(route)
        stub.assert_no_pending_responses()
    assert_clean_503(reply)
    assert len(backoff_sleeps) == attempts - 1  # retried, then gave up


@pytest.mark.parametrize("code", THROTTLING)
def test_a_throttled_write_holds_the_function_for_one_short_retry_not_for_seconds(api, code, backoff_sleeps):
    """Given DynamoDB throttling every write (a sustained hot key), when next
    is called, then the function tries twice, sleeps at most 50 ms in all and
    answers 503 with Retry-After, the client backing off outside Lambda. On
    main it tried four times with backoffs of up to 1, 2 and 4 s: one request
    could hold an environment (and its concurrency) for seconds."""
    with Stubber(core().store.client) as stub:
        for _ in range(dynamodb_calls.MAX_ATTEMPTS):
            stub.add_client_error("update_item", service_error_code=code, http_status_code=400)
        reply = api.call("next-post", name="orders")
    assert_clean_503(reply)
    assert len(backoff_sleeps) == 1  # two attempts
    assert sum(backoff_sleeps) <= 0.05


def test_a_503_names_no_library_class(api):
    """The 503's message said "(ThrottlingException)" or "(ReadTimeoutError)":
    a botocore class name, which tells a caller what the service is built
    on. The class stays in the log (the request failed line's cause)."""
    with Stubber(core().store.client) as stub:
        for _ in range(dynamodb_calls.MAX_ATTEMPTS):
            stub.add_client_error(
                "update_item", service_error_code="ThrottlingException", http_status_code=400
            )
        reply = api.call("next-post", name="orders")
    assert_clean_503(reply)
    assert reply.body["error"]["message"] == "DynamoDB is unavailable, try again shortly"
    assert not re.search(r"Exception|Error\b|botocore|\(", reply.raw["body"])


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
    ],
)
def test_connection_failures_are_503(api, monkeypatch, error):
    client = core().store.client

    def fail(**_):
        raise error

    monkeypatch.setattr(client, "update_item", fail)
    assert_clean_503(api.call("batch", name="orders", body={"count": 3}))


def test_idempotency_store_failure_is_503(api, monkeypatch):
    client = core().store.client

    def fail(**_):
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    monkeypatch.setattr(client, "put_item", fail)  # Powertools writes its record with PutItem
    assert_clean_503(api.call("next-post", name="orders", headers={"Idempotency-Key": "k"}))


def test_a_missing_table_is_a_500_without_details(api):
    with Stubber(core().store.client) as stub:
        stub.add_client_error(
            "update_item", service_error_code="ResourceNotFoundException", http_status_code=400
        )
        reply = api.call("next-post", name="orders")
    assert (reply.status, reply.error_code) == (500, "internal_error")
    assert "ResourceNotFound" not in reply.raw["body"]


def test_botocore_makes_one_attempt_and_the_store_retries_within_the_deadline():
    # botocore's own retries could sleep past the function's timeout (its
    # backoff, a server's x-amz-retry-after); dynamodb_calls.call_dynamodb retries
    # instead, and only while the invocation has time left (tests/integration/test_deadline.py)
    assert dynamodb_calls.BOTO_CONFIG.retries["total_max_attempts"] == 1
    assert dynamodb_calls.MAX_ATTEMPTS >= 2


def test_the_tests_check_every_request_against_the_model_which_the_deployed_client_skips(
    dynamodb, deployed_boto_config
):
    # Given the store's client as the tests make it
    client = dynamodb_calls.new_dynamodb_client()
    # When a request of the wrong shape is sent, botocore refuses it before sending
    with pytest.raises(ParamValidationError):
        client.update_item(TableName="counters", Key="not a map")
    # while the deployed client leaves that check to the tests and to DynamoDB
    assert deployed_boto_config.parameter_validation is False


def test_every_request_carries_the_stores_fixed_user_agent(api):
    """The store's client sends one User-Agent, made once, naming the
    service and botocore's version, instead of the default botocore rebuilt
    for every request."""
    seen = []
    client = core().store.client
    client.meta.events.register("before-send.dynamodb", lambda request, **_: seen.append(request.headers))
    assert api.call("batch", name="orders", body={"count": 2}).status == 200
    assert api.call("admin-get", name="orders").status == 200
    assert len(seen) >= 2
    [agent] = {headers["User-Agent"] for headers in seen}  # Powertools appends its own part
    assert agent.startswith(f"idblocks botocore/{botocore.__version__}".encode())


REFUSALS = ["ResourceNotFoundException", "ValidationException", "AccessDeniedException"]


@pytest.mark.parametrize("code", REFUSALS)
def test_a_refusal_no_retry_cures_leaves_the_store_as_a_domain_error(api, code):
    """The store promises that every DynamoDB error leaves it as a domain
    error, yet a ClientError that no retry cures (a missing table, a request
    DynamoDB calls invalid, denied access) escaped it raw, answered only by
    the resolver's catch-all. It is a 500 internal_error, its cause kept."""
    store = core().store
    with Stubber(store.client) as stub:
        stub.add_client_error("get_item", service_error_code=code, http_status_code=400)
        with pytest.raises(IdBlocksError) as raised:
            store.get("orders")
    assert raised.value.code == "internal_error"
    assert raised.value.message == "internal error; it has been logged"
    assert isinstance(raised.value.__cause__, ClientError)
    assert code in str(raised.value.__cause__)
