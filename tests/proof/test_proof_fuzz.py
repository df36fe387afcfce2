"""Bad input: every route of docs/openapi.json fuzzed with schemathesis against
the dev server, valid data and data that breaks the schema alike.

Checked: never a 5xx; every response matches the document (status, content
type, headers, body schema); requests that break the schema are refused and
change nothing at all; and a fuzzing run leaves alone every counter it had no
business touching.

The document is used without its security schemes: the dev server, like
`sam local start-api`, does not authenticate; API Gateway does, and
tests/infra/test_template.py holds its configuration (so ignored_auth is left
out). Every other check is on, positive_data_acceptance ("schema-valid data
must be accepted") included: the document says exactly what a request may
hold. What no schema can say is the request's relation to state or to its
other values, and the valid cases are made to respect it: a cursor is valid
only as a page returned it (a valid case sends none), a start must not be
above the max given with it (a valid case gives start <= max); and a key
reused for another count is the caller's history, answered 422 as a moved
counter is answered 409 (both expected of valid data).
"""

from __future__ import annotations

import json

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from devserver.process import DevServer
from localrun.template import ROOT

EXAMPLES = 30
EXCLUDED = [openapi_checks.ignored_auth]
GUARDS = {"guard.orders": {"start": 100}, "guard-invoices_2026": {"start": 5, "max": 1000}}


def unauthenticated_document() -> dict:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    for operations in document["paths"].values():
        for operation in operations.values():
            operation.pop("security", None)
    document["components"].pop("securitySchemes", None)
    return document


SCHEMA = schemathesis.openapi.from_dict(unauthenticated_document())
# Unknown query parameters are ignored, as HTTP APIs do; they are not bad input.
SCHEMA.config.generation.update(allow_extra_parameters=False)
SCHEMA.config.checks.positive_data_acceptance.expected_statuses = [
    *SCHEMA.config.checks.positive_data_acceptance.expected_statuses,
    "422",
]
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    state = tmp_path_factory.mktemp("fuzz") / "state.json"
    with DevServer("--fresh", state_file=state) as server:
        for name, options in GUARDS.items():
            assert server.post("/admin/counters", {"name": name, **options}).status_code == 201
            assert server.post(f"/counters/{name}/batch", {"count": 7}).status_code == 200
        server.state_file = state
        yield server


def counters_table(dev) -> list:
    return json.loads(dev.state_file.read_text())["tables"]["CountersTable"]


def names_in(case) -> set[str]:
    names = set()
    if case.path_parameters and isinstance(case.path_parameters.get("name"), str):
        names.add(case.path_parameters["name"])
    if isinstance(case.body, dict) and isinstance(case.body.get("name"), str):
        names.add(case.body["name"])
    return names


def within_what_no_schema_says(case) -> None:
    """A valid case as the API's state and cross-field rules take it (see above)."""
    if case.query:
        case.query.pop("cursor", None)
    body = case.body
    numbers = [body.get(field) for field in ("start", "max")] if isinstance(body, dict) else []
    if len(numbers) == 2 and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
        body["start"], body["max"] = sorted(numbers)


def fuzz(operation, mode: GenerationMode, on_case) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        # no shrinking: a failure is reported as generated, in seconds, not minutes
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case) -> None:
        on_case(case)

    run()


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: f"{op.method.upper()} {op.path}")
def test_valid_requests_conform_and_touch_only_what_they_name(dev, operation):
    touched: set[str] = set()
    session = requests.Session()

    def on_case(case) -> None:
        within_what_no_schema_says(case)
        touched.update(names_in(case))
        response = case.call(base_url=dev.url, session=session, timeout=10)
        assert response.status_code < 500, response.text
        case.validate_response(response, excluded_checks=EXCLUDED)

    before = {item["name"]["S"]: item for item in counters_table(dev)}
    fuzz(operation, GenerationMode.POSITIVE, on_case)
    after = {item["name"]["S"]: item for item in counters_table(dev)}
    untouched = set(before) - touched
    assert {name: after.get(name) for name in untouched} == {name: before[name] for name in untouched}
    assert set(GUARDS) <= untouched


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: f"{op.method.upper()} {op.path}")
def test_requests_that_break_the_schema_are_refused_and_change_nothing(dev, operation):
    session = requests.Session()

    def on_case(case) -> None:
        if any(value in ([], {}) for value in (case.query or {}).values()):
            # an empty list or object has no form in a query string: requests
            # sends the parameter not at all, so the draw is not the bad
            # input it was made as (and schemathesis does not see that)
            return
        before = counters_table(dev)
        response = case.call(base_url=dev.url, session=session, timeout=10)
        assert response.status_code < 500, response.text
        # negative_data_rejection: a request that breaks the schema is refused
        # (schemathesis knows when serialization made it a valid one after all)
        case.validate_response(response, excluded_checks=EXCLUDED)
        if case.meta is not None and case.meta.generation.mode.is_positive:
            # a draw with nothing left to break (next's body is optional:
            # leaving it out is valid), which schemathesis marks as valid
            return
        assert counters_table(dev) == before

    fuzz(operation, GenerationMode.NEGATIVE, on_case)
