"""The error catalogue (idblocks_core.domain.errors.ERROR_CODES), the code that
answers errors, template.yaml's GatewayResponses, docs/errors.md and
docs/openapi.json say the same thing.

The codes the code can answer are read from the sources themselves, not from
a second list: every ``code = "..."`` of an error class, every code literal
given to InvalidInput or error_response, or written as
``{"code": "..."}`` in the layer, the functions and the dev server, and every
code in template.yaml's gateway response templates."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from idblocks_core.api import fields as api_fields
from idblocks_core.api import gateway as http
from idblocks_core.domain.errors import ERROR_CODES, CounterExhausted, IdBlocksError, InvalidInput
from localrun.openapi import errors_table
from localrun.template import ROOT
from tests.support.gateway import DEFAULT_STATUS

SOURCES = [
    *sorted((ROOT / "layers" / "core" / "idblocks_core").rglob("*.py")),
    *sorted((ROOT / "functions").glob("*/app.py")),
    *sorted((ROOT / "devserver").glob("*.py")),
]
# Where, in a call, the error code is: (positional index, keyword).
CODE_ARGUMENT = {
    "InvalidInput": (0, "code"),
    "error_response": (1, "code"),
}


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def codes_in_source(path: Path) -> dict[str, set[int | None]]:
    """Code -> the literal statuses it is answered with in ``path`` (None where
    the status comes from the catalogue). A code built at run time (an
    f-string, a variable) cannot be checked, so it fails the test here."""
    found: dict[str, set[int | None]] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and [getattr(t, "id", None) for t in statement.targets] == ["code"]
                    and isinstance(statement.value, ast.Constant)
                    and statement.value.value != "error"  # the base class's placeholder
                ):
                    found.setdefault(statement.value.value, set()).add(None)
        elif isinstance(node, ast.Call) and _called_name(node) in CODE_ARGUMENT:
            index, keyword = CODE_ARGUMENT[_called_name(node)]
            given = dict(enumerate(node.args)) | {k.arg: k.value for k in node.keywords}
            argument = given.get(index, given.get(keyword))
            if argument is None:
                continue  # a definition's own call with the code passed through, e.g. error_response(...)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if (isinstance(argument, ast.Name) and argument.id == "code") or (
                isinstance(argument, ast.Attribute) and argument.attr == "code"
            ):
                continue  # handing on the code of an error made (and scanned) elsewhere
            assert isinstance(argument, ast.Constant), f"{where}: an error code must be a literal"
            status = node.args[0] if _called_name(node) == "error_response" and node.args else None
            literal = status.value if isinstance(status, ast.Constant) else None
            found.setdefault(argument.value, set()).add(literal)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code" and isinstance(value, ast.Constant):
                    found.setdefault(value.value, set()).add(None)
    return found


def function_codes() -> dict[str, set[int | None]]:
    merged: dict[str, set[int | None]] = {}
    for path in SOURCES:
        for code, statuses in codes_in_source(path).items():
            merged.setdefault(code, set()).update(statuses)
    return merged


def declared_gateway_responses(template) -> dict[str, dict]:
    """The Api's GatewayResponses as template.yaml declares them (SAM's
    form, before the transform: tests.support.gateway.gateway_responses
    reads the transformed OpenAPI body)."""
    return template.raw["Resources"]["Api"]["Properties"]["GatewayResponses"]


def gateway_codes(template) -> dict[str, int | str]:
    """Code -> status, from the template's gateway response bodies."""
    found = {}
    for kind, spec in declared_gateway_responses(template).items():
        (code,) = re.findall(r'"code": "(\w+)"', spec["ResponseTemplates"]["application/json"])
        # API Gateway's own status where the response sets none
        found[code] = int(spec["StatusCode"]) if "StatusCode" in spec else DEFAULT_STATUS[kind]
    return found


def test_every_code_the_functions_answer_is_catalogued_with_its_status():
    """A code answered by the functions but missing from the catalogue (so
    from docs/errors.md and the OpenAPI document) fails here, as does an
    answer whose status differs from the catalogue's."""
    answered = function_codes()
    assert set(answered) - set(ERROR_CODES) == set()
    for code, statuses in answered.items():
        entry = ERROR_CODES[code]
        assert entry.source in ("function", "both"), code
        assert statuses - {None} <= {entry.status}, code


def test_every_gateway_code_is_catalogued_with_its_status(template):
    for code, status in gateway_codes(template).items():
        assert code in ERROR_CODES, code
        assert (ERROR_CODES[code].status, ERROR_CODES[code].source) in {(status, "gateway"), (status, "both")}


def test_every_catalogued_code_is_answered_by_someone(template):
    """The catalogue lists nothing the API never says: each code is answered
    by the code (function) or by the template (gateway), as it claims."""
    by_functions, by_gateway = set(function_codes()), set(gateway_codes(template))
    unanswered = set()
    for code, entry in ERROR_CODES.items():
        expected = {"function": [by_functions], "gateway": [by_gateway], "both": [by_functions, by_gateway]}
        if not all(code in answered for answered in expected[entry.source]):
            unanswered.add(code)
    assert not unanswered, "catalogued, but nobody answers them"


def test_domain_errors_get_the_catalogues_status():
    assert http.status_of(InvalidInput("invalid_count", "x")) == 400
    assert http.status_of(CounterExhausted("a", 2, 9, 9)) == 409
    for cls in IdBlocksError.__subclasses__():
        for error_class in [cls, *cls.__subclasses__()]:
            code = error_class.__dict__.get("code")
            if isinstance(code, str):
                assert isinstance(ERROR_CODES[code].status, int), code


def test_an_uncatalogued_code_is_a_500_not_a_guess():
    assert http.status_of(InvalidInput("invalid_colour", "x")) == 500


def test_every_documented_field_has_a_catalogued_code():
    """Each parameter and body field of the OpenAPI document is declared with
    the code its refusal carries, and that code is in the catalogue."""
    spec = json.loads((ROOT / "docs" / "openapi.json").read_text())
    fields = set()
    for operations in spec["paths"].values():
        for operation in operations.values():
            fields |= {parameter["name"] for parameter in operation.get("parameters", [])}
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = body.get("schema", {}).get("$ref", "")
            if ref:
                fields |= set(spec["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"])
    assert fields == {
        "name", "idempotency-key", "count", "start", "max", "next", "cache", "limit", "cursor", "deleted",
    }  # fmt: skip
    declared = {f.name: f.code for f in vars(api_fields).values() if isinstance(f, http.Field)}
    assert set(declared) == fields
    assert set(declared.values()) <= set(ERROR_CODES)


def test_docs_errors_md_is_the_catalogue():
    text = (ROOT / "docs" / "errors.md").read_text()
    assert errors_table() in text, "docs/errors.md is stale: paste `python -m scripts.openapi --errors-table`"
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", text, re.MULTILINE)
    assert sorted(rows) == sorted((code, str(e.status)) for code, e in ERROR_CODES.items())


def test_readme_links_the_catalogue():
    assert "(docs/errors.md)" in (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def spec():
    return json.loads((ROOT / "docs" / "openapi.json").read_text())


def test_the_openapi_document_carries_the_catalogue(spec):
    catalogue = spec["x-error-codes"]
    assert set(catalogue) == set(ERROR_CODES)
    for code, entry in ERROR_CODES.items():
        assert (catalogue[code]["status"], catalogue[code]["retry"]) == (entry.status, entry.retry)


def test_each_error_response_lists_codes_of_its_own_status(spec):
    listed = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                codes = response["x-error-codes"]
                assert codes, (method, path, status)
                for code in codes:
                    assert ERROR_CODES[code].status == int(status), (method, path, code)
                    assert f"`{code}`" in response["description"]
                listed |= set(codes)
    # what a caller of a route can meet; a route the function does not serve
    # and a crash are not an operation's answers
    # and GET next's 405 belongs to a deployment whose document has no GET next
    # (AllowGetNext=false drops the operation); an event from outside the
    # stage (foreign_event) never came through an operation at all
    reachable = set(ERROR_CODES) - {
        "foreign_event",
        "route_not_found",
        "internal_error",
        "request_refused",
        "gateway_error",
        "method_not_allowed",
    }
    assert not reachable - listed
