"""docs/openapi.json is generated from the code and must say what the API does."""

from __future__ import annotations

import json

import jsonschema
import openapi_spec_validator
import pytest

from idblocks_core.domain.errors import ERROR_CODES
from localrun.openapi import _integers_as_int64, document
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


# -- made for generators ---------------------------------------------------------

NEXT = "/counters/{name}/next"
# (method, path) -> (operationId, tag): what generated clients name their functions and modules
OPERATIONS = {
    ("POST", NEXT): ("next_id", "ids"),
    ("GET", NEXT): ("next_id_get", "ids"),
    ("POST", "/counters/{name}/batch"): ("batch", "ids"),
    ("POST", "/admin/counters"): ("create_counter", "admin"),
    ("GET", "/admin/counters"): ("list_counters", "admin"),
    ("GET", "/admin/counters/{name}"): ("get_counter", "admin"),
    ("PUT", "/admin/counters/{name}"): ("update_counter", "admin"),
    ("DELETE", "/admin/counters/{name}"): ("delete_counter", "admin"),
}
INT64_MAX = 2**63 - 1


def operations(spec):
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def schemas_in(node):
    """Every schema object under ``node`` (a dict with a type)."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node
        for value in node.values():
            yield from schemas_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from schemas_in(value)


def test_the_document_passes_openapi_spec_validator(spec):
    openapi_spec_validator.validate(spec)


def test_next_declares_no_body_for_a_generator_to_fill(spec):
    """An optional body of ["object", "null"] made openapi-python-client's
    next_id fail unless the caller passed body=None."""
    assert {"get", "post"} == set(spec["paths"][NEXT])
    for operation in spec["paths"][NEXT].values():
        assert "requestBody" not in operation


def test_every_request_body_is_a_required_object(spec):
    for method, path, operation in operations(spec):
        if "requestBody" in operation:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert spec["components"]["schemas"][ref.rsplit("/", 1)[1]]["type"] == "object", (method, path)
            assert operation["requestBody"]["required"] is True


def test_the_update_body_is_one_object_with_both_fields_optional(spec):
    """A top-level anyOf of "next only" and "cache only" made generators
    build one model per branch: {"next": 7000, "cache": 5} went out without
    cache."""
    schema = spec["components"]["schemas"]["UpdateCounterRequest"]
    assert not {"anyOf", "oneOf", "allOf"} & set(schema)
    assert (schema["type"], set(schema["properties"]), schema.get("required")) == (
        "object",
        {"next", "cache", "deleted"},
        None,
    )
    assert schema["minProperties"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"next": 7000, "cache": 5},
        {"next": 7000},
        {"cache": 5},
        {"next": 7000, "cache": None},
        {"next": None, "cache": 5},
        {},
        {"next": None},
        {"next": None, "cache": None},
        {"next": 7000, "other": 1},
        {"deleted": True},
        {"next": 7000, "deleted": True},
        {"next": 7000, "deleted": False},
        {"cache": 5, "deleted": True},
        {"next": 7000, "deleted": "true"},
    ],
    ids=json.dumps,
)
def test_the_document_takes_an_update_body_exactly_when_the_api_does(api, spec, body):
    api.call("admin-create")
    reply = api.call("admin-set", body=body)
    document_takes = _validator(spec, {"$ref": "#/components/schemas/UpdateCounterRequest"}).is_valid(body)
    assert document_takes == (reply.status == 200), reply.body
    if reply.status == 200:  # what was given is kept, both fields together
        given = {key: value for key, value in body.items() if value is not None and key != "deleted"}
        assert {key: reply.body[key] for key in given} == given


def test_each_operation_has_a_short_id_and_a_tag(spec):
    found = {(method, path): (op["operationId"], op["tags"]) for method, path, op in operations(spec)}
    assert found == {key: (operation_id, [tag]) for key, (operation_id, tag) in OPERATIONS.items()}


def test_every_tag_is_declared_with_a_description(spec):
    declared = {tag["name"]: tag.get("description") for tag in spec["tags"]}
    assert set(declared) == {tag for _, tag in OPERATIONS.values()}
    assert all(declared.values())


def test_retry_after_is_declared_on_every_response_that_can_carry_it(spec, template):
    """409 request_in_progress and 503 service_unavailable carry Retry-After
    (every retry policy reads it), and so does API Gateway's 429
    quota_exceeded (template.yaml); a response without such a code does not
    declare it."""
    sends = {code for code, entry in ERROR_CODES.items() if entry.retry == "after Retry-After"}
    assert sends == {"request_in_progress", "service_unavailable"}
    responses = template.raw["Resources"]["Api"]["Properties"]["GatewayResponses"]
    assert "Retry-After" in responses["QUOTA_EXCEEDED"]["ResponseParameters"]["Headers"]
    sends.add("quota_exceeded")
    declared = set()
    for method, path, operation in operations(spec):
        for status, response in operation["responses"].items():
            carries = bool(sends & set(response.get("x-error-codes", [])))
            assert ("Retry-After" in response.get("headers", {})) == carries, (method, path, status)
            if carries:
                declared.add((method, path, status))
    assert ("POST", "/counters/{name}/batch", "409") in declared
    assert {(method, path, "503") for method, path, _ in operations(spec)} <= declared
    assert {(method, path, "429") for method, path, _ in operations(spec)} <= declared


def test_the_api_sends_retry_after_where_the_document_declares_it(api, spec, monkeypatch):
    from idblocks_core.domain.errors import RequestInProgress

    def in_progress(*_, **__):
        raise RequestInProgress(retry_after_seconds=3)

    monkeypatch.setattr("idblocks_core.logic.allocation.IdAllocator.hand_out", in_progress)
    reply = api.call("batch", body={"count": 5}, headers={"Idempotency-Key": "k"})
    assert (reply.status, reply.error_code, reply.headers["Retry-After"]) == (409, "request_in_progress", "3")
    header = spec["paths"]["/counters/{name}/batch"]["post"]["responses"]["409"]["headers"]["Retry-After"]
    assert jsonschema.Draft202012Validator(header["schema"]).is_valid(int(reply.headers["Retry-After"]))


def test_error_codes_are_an_enumeration_that_takes_a_code_added_later(spec):
    schemas = spec["components"]["schemas"]
    assert schemas["ErrorCode"]["enum"] == list(ERROR_CODES)
    code = schemas["ErrorDetail"]["properties"]["code"]
    assert code["anyOf"] == [{"$ref": "#/components/schemas/ErrorCode"}, {"type": "string"}]
    body = _validator(spec, {"$ref": "#/components/schemas/ErrorBody"})
    assert body.is_valid({"error": {"code": "counter_exists", "message": "m"}})
    assert body.is_valid({"error": {"code": "a_code_added_later", "message": "m"}})


def test_times_are_date_times_the_api_answers_as_such(api, spec):
    properties = spec["components"]["schemas"]["CounterState"]["properties"]
    assert properties["created_at"]["format"] == properties["updated_at"]["format"] == "date-time"
    api.call("admin-create")
    counter = api.call("admin-get").body
    schema = {"$ref": "#/components/schemas/CounterState", "components": spec["components"]}
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(counter)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(
            counter | {"created_at": "yesterday"}
        )


def test_every_integer_is_an_int64_within_its_range(spec):
    """Every integer is an int64 with its range inside it, so a generator
    makes a 64-bit field (Java's long, Go's int64), never a 32-bit one. PUT's
    next was documented up to 2^63 (max + 1 exhausts a counter of max
    2^63-1) without a format: generators made it 32 bits. The API still
    takes 2^63 there, as next's description says."""
    integers = [s for s in schemas_in([spec["paths"], spec["components"]]) if s["type"] == "integer"]
    assert len(integers) > 20
    assert all(s.get("format") == "int64" for s in integers)
    assert all(-(2**63) <= s.get(bound, 0) <= INT64_MAX for s in integers for bound in ("minimum", "maximum"))
    next_ = spec["components"]["schemas"]["UpdateCounterRequest"]["properties"]["next"]
    (integer,) = [s for s in next_["anyOf"] if s["type"] == "integer"]
    assert (integer["maximum"], integer["format"]) == (INT64_MAX, "int64")
    assert "2^63 (9223372036854775808)" in next_["description"]


def test_an_integer_beyond_int64_is_not_documented_as_one():
    with pytest.raises(ValueError, match="beyond int64"):
        _integers_as_int64({"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**63}}})


def test_the_servers_are_a_deployed_stage_a_custom_domain_and_the_dev_server(spec, template):
    stage, domain, dev = spec["servers"]
    assert stage["url"] == "https://{api_id}.execute-api.{region}.amazonaws.com/{stage}"
    assert stage["variables"]["stage"]["default"] == template.parameters["StageName"]
    assert {"api_id", "region", "stage"} == set(stage["variables"])
    assert domain["url"] == "https://{domain}{base_path}"
    assert domain["variables"]["base_path"]["default"] == "/" + template.parameters["CustomDomainBasePath"]
    assert dev["url"] == "http://127.0.0.1:3000"
    for server in spec["servers"]:
        assert server["description"]
        for name in server.get("variables", {}):
            assert f"{{{name}}}" in server["url"]


def test_sigv4_is_marked_as_api_gateway_marks_it(spec):
    scheme = spec["components"]["securitySchemes"]["sigv4"]
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    assert "execute-api" in scheme["description"]
    assert "other-languages.md" in scheme["description"]


def test_the_license_is_the_projects(spec):
    assert spec["info"]["license"] == {"name": "Apache-2.0", "identifier": "Apache-2.0"}
