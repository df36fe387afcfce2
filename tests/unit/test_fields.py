"""The field declarations (idblocks_core.api.fields) are read twice: by the
router, which validates requests without pydantic, and at development time
by pydantic, which writes the OpenAPI document from them. These tests hold
the two readings to the same answers, value by value, so that what the
document promises is what the functions accept; and hold the answers the
handlers build to the documented response models."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from idblocks_core.api import schemas
from idblocks_core.api.fields import BODIES, PARAMETERS, Refused
from idblocks_core.domain.model import Counter
from localrun.openapi import _parameter

VALUES: list[Any] = [
    1, 2, 100, 1000, 1001, 0, -1, 2**63 - 1, 2**63, 10**40, 1.0, 1.5, True, False, None, [], [1], {}, "1", "",
    " ", "orders", "a" * 128, "a" * 129, ".", "..", "...", ".a", "a b", "a/b", "\u00e9", "k", "x" * 512,
    "x" * 513, "!~", "5", " 5 ", "5.0", "5.5", "+5", "1_0", "1__0", "1e2", "0x5", "\uff15", "\u00a05", "-0",
    "00", ["5", "6"], "orders\n", "k\n", "\norders", "5\n",
]  # fmt: skip


def accepted_by_the_router(spec, value) -> bool:
    try:
        spec.accept(value)
    except Refused:
        return False
    return True


def body_fields():
    for model_name, fields in BODIES.items():
        for spec in fields:
            yield pytest.param(model_name, spec, id=f"{model_name}.{spec.name}")


@pytest.mark.parametrize(("model_name", "spec"), list(body_fields()))
def test_the_router_accepts_a_body_field_exactly_when_the_documented_model_does(model_name, spec):
    model = schemas.REQUEST_MODELS[model_name]
    required = {
        "BatchRequest": {"count": 1},
        "CreateCounterRequest": {"name": "x"},
        "SetNextRequest": {"next": 1},
    }
    for value in VALUES:
        body = {**required[model_name], spec.name: value}
        try:
            model.model_validate(body)
            by_pydantic = True
        except ValidationError as error:
            by_pydantic = not any(e["loc"][:1] == (spec.name,) for e in error.errors())
        # an optional field's null is taken before accept() is asked (resolver._validate_body)
        by_router = (value is None and not spec.required and spec.default is None) or accepted_by_the_router(
            spec, value
        )
        assert by_router == by_pydantic, (spec.name, value)


@pytest.mark.parametrize("spec", PARAMETERS, ids=lambda spec: spec.name)
def test_the_router_accepts_a_parameter_exactly_when_its_documented_schema_does(spec):
    adapter = TypeAdapter(_parameter(spec).annotation)
    # an event carries text, or a list of texts for a repeated name; absent
    # (None) is the default, never validated
    for value in [v for v in VALUES if isinstance(v, (str, list))]:
        try:
            adapter.validate_python(value)
            by_pydantic = True
        except ValidationError:
            by_pydantic = False
        assert accepted_by_the_router(spec, value) == by_pydantic, (spec.name, value)


def test_every_body_model_field_is_a_declared_field():
    for model_name, fields in BODIES.items():
        assert list(schemas.REQUEST_MODELS[model_name].model_fields) == [spec.name for spec in fields]


def test_the_counter_state_the_handlers_answer_is_the_documented_one():
    counter = Counter(
        name="orders",
        next=5,
        max=9,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )
    assert list(counter.as_dict()) == list(schemas.CounterState.model_fields)


def test_next_and_batch_answer_the_documented_results(api):
    assert list(api.call("next-post", name="orders").body) == list(schemas.NextResult.model_fields)
    batch = api.call("batch", name="orders", body={"count": 2}).body
    assert list(batch) == list(schemas.BatchResult.model_fields)
    assert list(api.call("admin-list").body) == list(schemas.CounterPage.model_fields)
