"""Bad input: every route of docs/openapi.json fuzzed with schemathesis against
the dev server, valid data and data that breaks the schema alike.

Checked: never a 5xx; every response matches the document (status, content
type, headers, body schema); requests that break the schema are refused and
change nothing at all; and a fuzzing run leaves alone every counter it had no
business touching.

The document is used without its security schemes: the dev server, like
`sam local start-api`, does not authenticate; API Gateway does, and
tests/infra/test_template.py holds its configuration. One schemathesis check is
left out, positive_data_acceptance ("schema-valid data must be accepted"):
some refusals depend on things a schema cannot say (start above max, count
above the deployment's MaxBatchSize, a cursor this API never issued, moving a
counter back) or are deliberate (5.0 is an integer to JSON Schema, but not a
count here).
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
EXCLUDED = [openapi_checks.positive_data_acceptance, openapi_checks.ignored_auth]
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
        before = counters_table(dev)
        response = case.call(base_url=dev.url, session=session, timeout=10)
        assert response.status_code < 500, response.text
        # negative_data_rejection: a request that breaks the schema is refused
        # (schemathesis knows when serialization made it a valid one after all)
        case.validate_response(response, excluded_checks=EXCLUDED)
        assert counters_table(dev) == before

    fuzz(operation, GenerationMode.NEGATIVE, on_case)
