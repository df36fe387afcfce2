"""docs/openapi.json is generated from the code and must say what the API does."""

from __future__ import annotations

import json

import jsonschema
import pytest

from localrun.openapi import document
from localrun.template import ROOT
from tests.support.api import event_files, load_event, routes

COMMITTED = ROOT / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def spec():
    return json.loads(COMMITTED.read_text())


def test_committed_document_is_current(spec):
    assert document() == spec, "docs/openapi.json is stale: run `make openapi` and commit it"


def test_document_covers_exactly_the_templates_routes(spec, template):
    documented = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    assert documented == set(routes(template))


def _validator(spec, schema):
    return jsonschema.Draft202012Validator({**schema, "components": spec["components"]})


@pytest.mark.parametrize("event_file", event_files(), ids=lambda p: p.stem)
def test_every_event_gets_a_response_the_document_describes(api, spec, event_file):
    # the counter the admin events name exists, so each event succeeds
    api.call("admin-create")
    event = load_event(event_file.stem)
    if event_file.stem == "admin-create":
        event["body"] = json.dumps({"name": "another"})
    reply = api.send(event)
    operation = spec["paths"][event["resource"]][event["httpMethod"].lower()]
    described = operation["responses"][str(reply.status)]
    assert reply.status < 300
    if reply.body is None:
        assert "content" not in described
    else:
        _validator(spec, described["content"]["application/json"]["schema"]).validate(reply.body)


@pytest.mark.parametrize(
    ("event_name", "kwargs"),
    [
        ("batch", {"raw_body": "{"}),
        ("batch", {"body": {"count": 0}}),
        ("admin-get", {"name": "missing"}),
        ("admin-set", {"body": {"next": 1}}),
        ("batch", {"raw_body": "x", "headers": {"Content-Type": "text/plain"}}),
        ("batch", {"body": {"count": 5}, "headers": {"Idempotency-Key": "has space"}}),
        ("next-post", {"raw_body": "x", "headers": {"Content-Type": "text/plain"}}),
        ("admin-create", {"body": {"name": "invoices"}}),
        ("admin-create", {"body": {"name": "x", "start": 5, "unknown": 1}}),
        ("admin-list", {"query": {"cursor": "nope"}}),
        ("admin-set", {"body": {"next": 10**16}}),
        ("admin-delete", {"name": "missing"}),
    ],
)
def test_error_responses_are_documented(api, spec, event_name, kwargs):
    """Each error's status is a response of its operation, and its code one
    of that response's x-error-codes."""
    api.call("admin-create")
    api.call("batch", name="invoices", body={"count": 5})
    reply = api.call(event_name, **kwargs)
    event = load_event(event_name)
    operation = spec["paths"][event["resource"]][event["httpMethod"].lower()]
    assert str(reply.status) in operation["responses"], reply.status
    schema = operation["responses"][str(reply.status)]["content"]["application/json"]["schema"]
    _validator(spec, schema).validate(reply.body)
    assert reply.error_code in operation["responses"][str(reply.status)]["x-error-codes"]
