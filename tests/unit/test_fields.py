"""What the OpenAPI document says a field takes is what the API takes: for
each declared field, value by value, the document's schema (JSON Schema
2020-12, as OpenAPI 3.1 reads it) and the domain check the use case runs on
the value as the API reads it (a body through its JSON parser) agree. The
cursor is left out: it is opaque, valid only as a page returned it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from idblocks_core.api import fields
from idblocks_core.api.gateway import _QUERY_BOOLEANS, _integer, parse_body
from idblocks_core.domain.errors import InvalidInput
from idblocks_core.domain.model import Counter
from idblocks_core.domain.rules import (
    LIMIT_MAX_ID,
    LIST_LIMIT_MAX,
    check_cache,
    check_count,
    check_deleted,
    check_idempotency_key,
    check_limit,
    check_name,
    check_new_counter,
    check_next,
)
from localrun.openapi import RESPONSE_MODELS, document

MAX_BATCH_SIZE = 1_000_000  # template.yaml's default, as documented
CHECKS = {
    "invalid_name": check_name,
    "invalid_idempotency_key": check_idempotency_key,
    "invalid_limit": lambda value: check_limit(value, LIST_LIMIT_MAX),
    "invalid_count": lambda value: check_count(value, MAX_BATCH_SIZE),
    "invalid_start": lambda value: check_new_counter(value, LIMIT_MAX_ID),
    "invalid_max": lambda value: check_new_counter(None, value),
    "invalid_next": check_next,
    "invalid_cache": check_cache,
    "invalid_deleted": check_deleted,
}
NUMBERS: list[Any] = [
    1, 2, 100, 1000, 1001, 0, -1, MAX_BATCH_SIZE, MAX_BATCH_SIZE + 1, 1_000_001, 2**53, 2**63 - 1, 2**63,
    2**63 + 1, 10**40, 1.0, 5.0, 1.5, 1e2, 1e-2, True, False,
]  # fmt: skip
TEXTS = [
    "1", "", " ", "orders", "a" * 128, "a" * 129, ".", "..", "...", ".a", "a b", "a/b", "\u00e9", "k",
    "!~", "x" * 128, "x" * 129, "orders\n", "k\n", "\norders", "5",
]  # fmt: skip
VALUES = [*NUMBERS, *TEXTS, None, [], [1], {}]
# Taken by the API though the document's int64 stops below it, as the field's
# description says: PUT's next of 2^63, max + 1 of a counter whose max is
# 2^63-1. Nothing else may differ.
BEYOND_THE_DOCUMENT = {("next", "body", 2**63)}


def _ecma_pattern(validator, pattern, instance, schema):
    """JSON Schema's patterns are ECMA-262 regular expressions, where $ is
    the end of the text; Python's $ also matches before a final newline."""
    if isinstance(instance, str) and not re.search(re.sub(r"\$$", r"\\Z", pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _ecma_pattern})


def accepted(check, value) -> bool:
    try:
        check(value)
    except InvalidInput:
        return False
    return True


def documented_fields():
    spec = document()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                yield pytest.param(
                    parameter["name"],
                    parameter["in"],
                    parameter["schema"],
                    id=f"{method} {path} {parameter['name']}",
                )
            ref = (
                operation.get("requestBody", {})
                .get("content", {})
                .get("application/json", {})
                .get("schema", {})
            )
            if "$ref" in ref:
                body = spec["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
                for name, schema in body["properties"].items():
                    yield pytest.param(name, "body", schema, id=f"{method} {path} {name}")


def declared(name: str, where: str) -> Any:
    return next(
        f for f in vars(fields).values() if isinstance(f, fields.Field) and (f.name, f.where) == (name, where)
    )


@pytest.mark.parametrize(("name", "where", "schema"), list(documented_fields()))
def test_the_document_takes_a_value_exactly_when_the_domain_check_does(name, where, schema):
    spec = declared(name, where)
    if spec.code == "invalid_cursor":
        pytest.skip("opaque")
    check = CHECKS[spec.code]
    validator = Validator(schema)
    for value in VALUES:
        if where == "body":
            if value is None and not spec.required:
                continue  # null: the use case's default, as the document's null says
            as_read = parse_body(json.dumps({name: value}))[name]
        elif where == "query" and schema["type"] == "boolean":
            # The document's boolean, sent as its text (any other text is none)
            if isinstance(value, bool):
                as_read = _QUERY_BOOLEANS[str(value).lower()]
            elif isinstance(value, str):
                as_read = _QUERY_BOOLEANS.get(value, value)
            else:
                continue
        elif where == "query":  # the document's integer, sent as text
            if type(value) is not int:
                continue
            as_read = _integer(str(value))
        else:
            if not isinstance(value, str) or (where == "path" and value == ""):
                continue  # API Gateway routes no empty segment
            as_read = value
        documented = validator.is_valid(value)
        if type(value) is int and (name, where, value) in BEYOND_THE_DOCUMENT:
            assert not documented, (name, value)
            assert accepted(check, as_read), (name, value)
            assert str(value) in schema["description"], schema["description"]
            continue
        assert documented == accepted(check, as_read), (name, value)


def test_every_documented_field_is_declared_with_a_catalogued_code():
    codes = {declared(name, where).code for name, where, _ in (p.values for p in documented_fields())}
    assert codes == {*CHECKS, "invalid_cursor"}


def test_the_counter_state_the_handlers_answer_is_the_documented_one():
    counter = Counter(
        name="orders",
        next=5,
        max=9,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )
    models = {model.__name__: model for model in RESPONSE_MODELS}
    documented = list(models["CounterState"].model_fields)
    # A live counter's state has no "deleted": it is there on deleted ones only.
    assert list(counter.as_dict()) == [field for field in documented if field != "deleted"]
    assert list(replace(counter, deleted=True).as_dict()) == documented


def test_next_and_batch_answer_the_documented_results(api):
    models = {model.__name__: model for model in RESPONSE_MODELS}
    assert list(api.call("next-post", name="orders").body) == list(models["NextResult"].model_fields)
    batch = api.call("batch", name="orders", body={"count": 2}).body
    assert list(batch) == list(models["BatchResult"].model_fields)
    page = list(models["CounterPage"].model_fields)
    assert list(api.call("admin-list").body) == [field for field in page if field != "deleted"]
    assert list(api.call("admin-list", query={"deleted": "true"}).body) == page
