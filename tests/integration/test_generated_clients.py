"""Clients generated from the committed docs/openapi.json work as generated,
against the dev server: openapi-python-client's (Python) and
openapi-typescript's types with openapi-fetch (TypeScript, compiled by
tsc --strict). Each is generated afresh, into a temporary directory (Python)
or api-tools/generated/ (git-ignored), and nothing generated is edited.

Both run one scenario and must see the same answers: create a counter, next
three times without a body, a batch sent twice with one Idempotency-Key (one
block), read, update next and cache together (both kept), a typed error for
each error class the scenario can provoke (its code one of ErrorCode's
members), delete.

The signing recipes of docs/other-languages.md (examples/sigv4_httpx.py, an
httpx.Auth; api-tools/src/sigv4.ts, an openapi-fetch middleware) sign the
generated clients' requests to the dev server with ClientAuth AWS_IAM, which
verifies SigV4 as API Gateway does (devserver/sigv4.py: botocore's signature
recomputed over the request as it arrived, its scope, clock and session
token): each request is taken, and each change made after signing (body,
path, query, Idempotency-Key, Content-Type) is refused with
invalid_signature.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from devserver.process import DevServer
from examples.sigv4_httpx import SigV4
from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.proxy import LossyProxy
from tests.support.signing import ACCESS_KEY, REGION, SECRET_KEY, SESSION_ENV, TOKEN, iam_dev_server

DOCUMENT = ROOT / "docs" / "openapi.json"
API_TOOLS = ROOT / "api-tools"
VENV_BIN = Path(sys.executable).parent
PACKAGE = "idblocks_client"  # what openapi-python-client names it, from the document's title

needs_api_tools = pytest.mark.skipif(
    not (API_TOOLS / "node_modules" / ".installed").exists() and not os.environ.get("IDBLOCKS_REQUIRE_BUILD"),
    reason="the API tools are not installed: make api-tools (make test does)",
)


def run(argv: list[str | Path], cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=scrubbed_environment() | {"PATH": f"{VENV_BIN}:{os.environ['PATH']}"} | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout + done.stderr


def expected(name: str) -> dict[str, Any]:
    """What every client must see: status, name and next of the new counter;
    the IDs; the block, twice; next and cache read, updated and read again;
    each error's status, code and whether the code is one of ErrorCode's."""
    return {
        "created": [201, name, 1],
        "ids": [1, 2, 3],
        "blocks": [[4, 13], [4, 13]],
        "read": [14, 1],
        "updated": [1000, 5],
        "reread": [1000, 5],
        "errors": {
            "read a missing counter": [404, "counter_not_found", True],
            "create it again": [409, "counter_exists", True],
            "move it back": [409, "counter_would_move_back", True],
            "update nothing": [400, "invalid_body", True],
            "a batch of 0": [400, "invalid_count", True],
            "reuse the key for another count": [422, "idempotency_key_reused", True],
        },
        "deleted": 204,
        "gone": [404, "counter_not_found", True],
    }


# -- Python: openapi-python-client ----------------------------------------------


@pytest.fixture(scope="module")
def generated_python(tmp_path_factory) -> Iterator[tuple[str, ModuleType]]:
    """The generator's output, and the package it wrote, importable while the
    module's tests run. Its formatter (ruff) is on PATH, as in `make test`."""
    out = tmp_path_factory.mktemp("generated") / "python"
    output = run([VENV_BIN / "openapi-python-client", "generate", "--path", DOCUMENT, "--output-path", out])
    sys.path.insert(0, str(out))
    try:
        yield output, importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for module in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[module]


def test_openapi_python_client_generates_without_a_warning(generated_python):
    output, _ = generated_python
    assert "warning" not in output.lower(), output


def test_the_generated_python_client_names_its_functions_by_tag_and_operation(generated_python):
    _, package = generated_python
    api = Path(package.__file__).parent / "api"
    modules = {f"{p.parent.name}/{p.stem}" for p in api.glob("*/*.py") if p.stem != "__init__"}
    assert modules == {
        "ids/next_id",
        "ids/next_id_get",
        "ids/batch",
        "admin/create_counter",
        "admin/list_counters",
        "admin/get_counter",
        "admin/update_counter",
        "admin/delete_counter",
    }


def python_scenario(url: str, name: str) -> dict[str, Any]:
    from idblocks_client import Client
    from idblocks_client.api.admin import create_counter, delete_counter, get_counter, update_counter
    from idblocks_client.api.ids import batch, next_id
    from idblocks_client.models import (
        BatchRequest,
        BatchResult,
        CounterState,
        CreateCounterRequest,
        ErrorBody,
        ErrorCode,
        NextResult,
        UpdateCounterRequest,
    )

    client = Client(base_url=url)

    def failure(response: Any) -> list[Any]:
        assert isinstance(response.parsed, ErrorBody), response
        code = response.parsed.error.code
        return [response.status_code, getattr(code, "value", code), isinstance(code, ErrorCode)]

    def state(counter: Any) -> list[Any]:
        assert isinstance(counter, CounterState), counter
        assert isinstance(counter.created_at, datetime), counter.created_at  # date-time, parsed
        return [counter.next_, counter.cache]

    created = create_counter.sync_detailed(client=client, body=CreateCounterRequest(name=name))
    assert isinstance(created.parsed, CounterState), created
    ids = []
    for _ in range(3):
        answer = next_id.sync(name, client=client)  # no body: the operation declares none
        assert isinstance(answer, NextResult), answer
        ids.append(answer.id)
    blocks = []
    for _ in range(2):
        block = batch.sync(
            name, client=client, body=BatchRequest(count=10), idempotency_key=f"scenario-{name}"
        )
        assert isinstance(block, BatchResult), block
        blocks.append([block.start, block.end])
    read = state(get_counter.sync(name, client=client))
    updated = state(update_counter.sync(name, client=client, body=UpdateCounterRequest(next_=1000, cache=5)))
    reread = state(get_counter.sync(name, client=client))

    missing = get_counter.sync_detailed(f"{name}-missing", client=client)
    again = create_counter.sync_detailed(client=client, body=CreateCounterRequest(name=name))
    assert again.parsed.error.code is ErrorCode.COUNTER_EXISTS  # usable as the enumeration
    back = update_counter.sync_detailed(name, client=client, body=UpdateCounterRequest(next_=5))
    nothing = update_counter.sync_detailed(name, client=client, body=UpdateCounterRequest())
    zero = batch.sync_detailed(name, client=client, body=BatchRequest(count=0))
    reused = batch.sync_detailed(
        name, client=client, body=BatchRequest(count=11), idempotency_key=f"scenario-{name}"
    )
    deleted = delete_counter.sync_detailed(name, client=client)
    gone = get_counter.sync_detailed(name, client=client)
    return {
        "created": [created.status_code, created.parsed.name, created.parsed.next_],
        "ids": ids,
        "blocks": blocks,
        "read": read,
        "updated": updated,
        "reread": reread,
        "errors": {
            "read a missing counter": failure(missing),
            "create it again": failure(again),
            "move it back": failure(back),
            "update nothing": failure(nothing),
            "a batch of 0": failure(zero),
            "reuse the key for another count": failure(reused),
        },
        "deleted": deleted.status_code,
        "gone": failure(gone),
    }


def test_the_generated_python_client_runs_the_scenario(generated_python, dev):
    assert python_scenario(dev.url, "generated-python") == expected("generated-python")


def test_the_generated_python_client_takes_an_error_code_added_later(generated_python):
    from idblocks_client.models import ErrorCode, ErrorDetail

    assert ErrorDetail.from_dict({"code": "counter_exists", "message": "m"}).code is ErrorCode.COUNTER_EXISTS
    assert ErrorDetail.from_dict({"code": "a_code_added_later", "message": "m"}).code == "a_code_added_later"


def test_the_blocks_example_hands_out_ids_and_asks_again_with_the_same_key_after_a_lost_answer(
    generated_python, dev
):
    """examples/generated_blocks.py, the pattern docs/other-languages.md
    shows: through a proxy that loses the first block's answer after the
    service took it, the example asks again with its key and gets that block,
    so no block is burned."""
    from idblocks_client import Client

    from examples.generated_blocks import Blocks

    with LossyProxy(dev.url) as proxy:
        proxy.lose = 1
        ids = Blocks(Client(base_url=proxy.url), "generated-blocks", size=10)
        taken = [ids.next() for _ in range(25)]
    assert taken == list(range(1, 26))
    assert proxy.lost == [("POST", "/counters/generated-blocks/batch", 200)]
    assert dev.get("/admin/counters/generated-blocks").json()["next"] == 31  # three blocks of 10


# -- TypeScript: openapi-typescript + openapi-fetch -----------------------------


@pytest.fixture(scope="module")
def compiled_typescript() -> Path:
    """api-tools/src compiled by tsc --strict with the types generated now:
    the scenario and the signing harness, in api-tools/dist/src."""
    for stale in (API_TOOLS / "generated", API_TOOLS / "dist"):
        shutil.rmtree(stale, ignore_errors=True)
    bin_ = API_TOOLS / "node_modules" / ".bin"
    run([bin_ / "openapi-typescript", DOCUMENT, "--enum", "--output", "generated/idblocks.ts"], cwd=API_TOOLS)
    run([bin_ / "tsc", "-p", "tsconfig.json", "--strict"], cwd=API_TOOLS)
    return API_TOOLS / "dist" / "src"


@needs_api_tools
def test_the_generated_typescript_client_runs_the_scenario(compiled_typescript, dev):
    output = run(
        ["node", compiled_typescript / "scenario.js", "generated-typescript"], env={"IDBLOCKS_URL": dev.url}
    )
    assert json.loads(output.strip().splitlines()[-1]) == expected("generated-typescript")


# -- Signing for AWS_IAM: the recipes against a SigV4 verifier -----------------

# One request of each kind the recipes must sign: a body, a query with a
# cursor, a header of the API's own (Idempotency-Key), none, PUT.
REQUESTS = ["create", "create another", "list", "list from the cursor", "batch", "next", "update"]
TAKEN = [[201, None], [201, None], [200, None], [200, None], [200, None], [200, None], [200, None]]
REFUSED = [403, "invalid_signature"]
# A change made after signing -> the requests it changes. Each must be
# refused: the recipe signed what it changes (content-type and
# Idempotency-Key among the headers, the query, the path, the body).
TAMPERED = {
    "body": {"batch"},
    "path": {"batch"},
    "query": {"list", "list from the cursor"},
    "header": {"batch"},
    "content-type": {"batch"},
}


@pytest.fixture(scope="module")
def verifier(tmp_path_factory) -> Iterator[DevServer]:
    """The dev server checking SigV4 as API Gateway does (ClientAuth
    AWS_IAM), with temporary credentials: a session token must be signed too."""
    with iam_dev_server(tmp_path_factory.mktemp("verifier") / "state.json", SESSION_ENV) as server:
        yield server


def expected_answers(tamper: str) -> list[list[Any]]:
    changed = TAMPERED.get(tamper, set())
    return [REFUSED if name in changed else taken for name, taken in zip(REQUESTS, TAKEN, strict=True)]


class Tampering(httpx.HTTPTransport):
    """Changes each request after the auth signed it, as a hop that rewrites
    requests would."""

    def __init__(self, tamper: str, name: str) -> None:
        super().__init__()
        self.tamper, self.name = tamper, name

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url, headers, body = request.url, request.headers.copy(), request.content
        batch = url.path.endswith("/batch")
        if self.tamper == "body" and batch:
            body = body.replace(b"25", b"26")
        elif self.tamper == "path" and batch:
            url = url.copy_with(path=url.path.replace(f"/{self.name}/", f"/{self.name}-other/"))
        elif self.tamper == "query" and "limit" in url.params:
            url = url.copy_set_param("limit", "2")
        elif self.tamper == "header" and batch:
            headers["idempotency-key"] = "key-2"
        elif self.tamper == "content-type" and batch:
            headers["content-type"] = "application/json; charset=utf-8"
        return super().handle_request(httpx.Request(request.method, url, headers=headers, content=body))


def python_signed_requests(url: str, name: str, tamper: str = "") -> list[list[Any]]:
    """The requests of REQUESTS through the generated client, signed by the
    httpx recipe (and changed after it when ``tamper`` says so)."""
    from idblocks_client import Client
    from idblocks_client.api.admin import create_counter, list_counters, update_counter
    from idblocks_client.api.ids import batch, next_id
    from idblocks_client.models import BatchRequest, CreateCounterRequest, ErrorBody, UpdateCounterRequest

    credentials = Credentials(ACCESS_KEY, SECRET_KEY, TOKEN)
    httpx_args: dict[str, Any] = {"auth": SigV4(credentials, REGION), "transport": Tampering(tamper, name)}
    client = Client(base_url=url, httpx_args=httpx_args)

    def seen(response: Any) -> list[Any]:
        parsed = response.parsed
        code = parsed.error.code if isinstance(parsed, ErrorBody) else None
        return [response.status_code, getattr(code, "value", code)]

    answers = [
        seen(create_counter.sync_detailed(client=client, body=CreateCounterRequest(name=name))),
        seen(create_counter.sync_detailed(client=client, body=CreateCounterRequest(name=f"{name}-2"))),
    ]
    listing = list_counters.sync_detailed(client=client, limit=1)
    answers.append(seen(listing))
    cursor = getattr(listing.parsed, "cursor", None) or "none"
    answers.append(seen(list_counters.sync_detailed(client=client, limit=1, cursor=cursor)))
    answers.append(
        seen(batch.sync_detailed(name, client=client, body=BatchRequest(count=25), idempotency_key="key-1"))
    )
    answers.append(seen(next_id.sync_detailed(name, client=client)))
    answers.append(
        seen(
            update_counter.sync_detailed(name, client=client, body=UpdateCounterRequest(next_=7000, cache=5))
        )
    )
    return answers


@pytest.mark.parametrize("tamper", ["", *TAMPERED], ids=["as signed", *(f"{t} changed" for t in TAMPERED)])
def test_the_httpx_auth_recipe_is_taken_by_a_sigv4_verifier_and_a_change_after_it_is_not(
    generated_python, verifier, tamper
):
    name = f"py-signed-{tamper or 'as-signed'}"
    assert python_signed_requests(verifier.url, name, tamper) == expected_answers(tamper)


@needs_api_tools
@pytest.mark.parametrize("tamper", ["", *TAMPERED], ids=["as signed", *(f"{t} changed" for t in TAMPERED)])
def test_the_fetch_middleware_recipe_is_taken_by_a_sigv4_verifier_and_a_change_after_it_is_not(
    compiled_typescript, verifier, tamper
):
    name = f"ts-signed-{tamper or 'as-signed'}"
    output = run(
        ["node", compiled_typescript / "signed-requests.js"],
        env=SESSION_ENV | {"IDBLOCKS_URL": verifier.url, "IDBLOCKS_NAME": name, "IDBLOCKS_TAMPER": tamper},
    )
    assert json.loads(output.strip().splitlines()[-1]) == expected_answers(tamper)


def test_the_other_languages_page_shows_the_code_these_tests_run():
    page = (ROOT / "docs" / "other-languages.md").read_text()
    for path in ("examples/generated_blocks.py", "examples/sigv4_httpx.py", "api-tools/src/sigv4.ts"):
        assert f'--8<-- "{path}"' in page, path
