"""A function answers only events that came through its own API stage, and
every answer tells a browser not to sniff it.

Whoever may invoke a function directly (lambda:InvokeFunction) can write
any event, the caller's identity included: no check inside the function
can tell such an event from API Gateway's. What the check here stops is an
event that does not even claim this stage (another stage of the API, a test
event sent to the wrong deployment, a hand-written one without API Gateway's
context); the defence against a forger is that no caller needs or gets
lambda:InvokeFunction (tests/infra/test_policies.py). docs/security.md says both."""

from __future__ import annotations

import json

import pytest

from tests.support.api import event_files, load_event

VICTIM = "arn:aws:iam::123456789012:role/billing"


@pytest.fixture
def warnings(api, logged):
    """The functions' log lines (as CloudWatch gets them) that were warnings."""
    return lambda: [line for line in logged() if line.get("level") == "WARNING"]


def forged(event_name: str, **context: object) -> dict:
    event = load_event(event_name)
    event["requestContext"].update(context)
    event["requestContext"]["identity"]["userArn"] = VICTIM
    event["headers"]["Idempotency-Key"] = "k"
    event["multiValueHeaders"]["Idempotency-Key"] = ["k"]
    return event


@pytest.mark.parametrize("event_file", event_files(), ids=lambda p: p.stem)
def test_an_event_of_another_stage_is_refused_logged_and_changes_nothing(
    api, table_snapshot, warnings, event_file
):
    # Given an event that names another caller and another stage of the API
    event = forged(event_file.stem, stage="prod")
    before = table_snapshot()
    # When it is sent to the function (as a direct invocation would)
    reply = api.send(event)
    # Then it is refused, nothing is written, and the refusal says what it claimed
    assert (reply.status, reply.error_code) == (403, "foreign_event"), reply.body
    assert table_snapshot() == before
    [line] = [w for w in warnings() if w["message"] == "event refused: not from this API stage"]
    assert (line["claimed_stage"], line["expected_stage"]) == ("'prod'", "v1")
    assert line["claimed_caller"] == repr(VICTIM)


@pytest.mark.parametrize(
    "context",
    [
        pytest.param(None, id="no requestContext"),
        pytest.param({"stage": "v1"}, id="no apiId"),
        pytest.param({"stage": "v1", "apiId": ""}, id="empty apiId"),
        pytest.param({"apiId": "1234567890"}, id="no stage"),
        pytest.param("v1", id="not an object"),
    ],
)
def test_an_event_without_api_gateways_context_is_refused(api, table_snapshot, context):
    event = load_event("batch")
    if context is None:
        del event["requestContext"]
    else:
        event["requestContext"] = context
    before = table_snapshot()
    reply = api.send(event)
    assert (reply.status, reply.error_code) == (403, "foreign_event")
    assert table_snapshot() == before


def test_the_stage_is_the_one_the_template_deploys(api, lambda_env):
    """API_STAGE is the template's StageName: a stack deployed with stage
    prod answers prod's events and refuses v1's."""
    lambda_env(API_STAGE="prod")
    assert api.call("next-post", name="orders").error_code == "foreign_event"
    event = load_event("next-post")
    event["requestContext"]["stage"] = "prod"
    assert api.send(event).status == 200


@pytest.mark.parametrize("event_file", event_files(), ids=lambda p: p.stem)
def test_every_answer_says_nosniff(api, event_file):
    """Answers had no X-Content-Type-Options: a browser could take an error's
    JSON for a page. Now every one, success, error or empty, carries nosniff."""
    api.call("admin-create", body={"name": "orders"})
    for reply in (
        api.call(event_file.stem, name="orders"),
        api.call(event_file.stem, name="bad name!"),
        api.send(forged(event_file.stem, stage="prod")),
    ):
        assert reply.headers["X-Content-Type-Options"] == "nosniff", (event_file.stem, reply.status)
        assert reply.raw["multiValueHeaders"]["X-Content-Type-Options"] == ["nosniff"]
        assert not any(name.lower().startswith("access-control") for name in reply.headers)  # no CORS


@pytest.mark.parametrize("event", [[], "v1", None, 7], ids=["list", "text", "null", "number"])
def test_a_payload_that_is_not_an_event_at_all_is_refused(api, table_snapshot, event):
    """A direct invocation may send any JSON, not only an object."""
    from localrun.invoke import LocalContext, load_handler

    spec = api.functions["BatchFunction"]
    before = table_snapshot()
    answer = load_handler(spec)(event, LocalContext("BatchFunction", spec.timeout_seconds))
    assert answer["statusCode"] == 403
    assert json.loads(answer["body"])["error"]["code"] == "foreign_event"
    assert table_snapshot() == before
