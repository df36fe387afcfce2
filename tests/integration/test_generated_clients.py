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
httpx.Auth; api-tools/src/sigv4.ts, an openapi-fetch middleware) sign
requests sent to a server that records them; each signature must be
botocore's own for the request as it arrived (its path with the stage, its
query, its body, the headers it signed), as API Gateway checks it.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devserver.process import DevServer
from examples.sigv4_httpx import SigV4
from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.loopback import LoopbackServer, QuietHandler
from tests.support.proxy import LossyProxy

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


@pytest.fixture(scope="module")
def dev(tmp_path_factory) -> Iterator[DevServer]:
    with DevServer("--fresh", state_file=tmp_path_factory.mktemp("dev") / "state.json") as server:
        yield server


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


# -- Signing for AWS_IAM: the recipes against botocore ---------------------------

REGION = "eu-west-1"
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example")
STAGE = "/v1"
NAME = "orders.2026_v-1"


@dataclasses.dataclass(frozen=True)
class Received:
    method: str
    target: str  # the path and query, as sent
    headers: dict[str, str]  # names in lower case
    body: bytes


class RecordingServer(LoopbackServer):
    """Records each request and answers 204, as a stand-in for API Gateway."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        server = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {key.lower(): value for key, value in self.headers.items()}
                server.received.append(Received(self.command, self.path, headers, body))
                self.send_response(204)
                self.end_headers()

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._serve(Handler)


def botocore_authorization(request: Received, credentials: Credentials = CREDENTIALS) -> str:
    """The Authorization header botocore's SigV4 signer makes for the request
    as it arrived, over the headers it says it signed, at its X-Amz-Date. A
    signed X-Amz-Content-Sha256 (@smithy/signature-v4 adds one) is taken as
    the hash of the body that arrived: botocore would sign the value given."""
    fields = dict(
        part.strip().split("=", 1) for part in request.headers["authorization"].split(" ", 1)[1].split(",")
    )
    added_by_botocore = ("x-amz-date", "x-amz-security-token")
    signed = {n: request.headers[n] for n in fields["SignedHeaders"].split(";") if n not in added_by_botocore}
    if "x-amz-content-sha256" in signed:
        signed["x-amz-content-sha256"] = hashlib.sha256(request.body).hexdigest()
    aws = AWSRequest(
        method=request.method,
        url=f"http://{request.headers['host']}{request.target}",
        data=request.body,
        headers=signed,
    )
    at = datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    with mock.patch("botocore.auth.get_current_datetime", return_value=at):
        SigV4Auth(credentials, "execute-api", REGION).add_auth(aws)
    return aws.headers["Authorization"]


def check_signed_as_botocore_signs(received: list[Received]) -> None:
    assert [(r.method, r.target.split("?")[0]) for r in received] == [
        ("GET", f"{STAGE}/admin/counters"),
        ("POST", f"{STAGE}/counters/{NAME}/batch"),
        ("POST", f"{STAGE}/counters/{NAME}/next"),
        ("PUT", f"{STAGE}/admin/counters/{NAME}"),
    ]
    listing, block, _, update = received
    assert "cursor=" in listing.target
    assert json.loads(block.body) == {"count": 25}
    assert json.loads(update.body) == {"next": 7000, "cache": 5}
    for request in received:
        assert request.headers["authorization"] == botocore_authorization(request), request
        assert request.headers["x-amz-security-token"] == CREDENTIALS.token
        signed = request.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"host", "x-amz-date", "x-amz-security-token"} <= set(signed)
        assert ("content-type" in signed) == bool(request.body), request
    assert "idempotency-key" in block.headers["authorization"]
    # the check itself: a request changed after signing is not botocore's
    for changed in (
        dataclasses.replace(block, body=b'{"count": 26}'),
        dataclasses.replace(block, target=block.target.replace(STAGE, "", 1)),
        dataclasses.replace(listing, target=listing.target.replace("limit=5", "limit=6")),
        dataclasses.replace(block, headers=block.headers | {"idempotency-key": "key-2"}),
    ):
        assert changed.headers["authorization"] != botocore_authorization(changed)


def test_the_httpx_auth_recipe_signs_as_botocore(generated_python):
    from idblocks_client import Client
    from idblocks_client.api.admin import list_counters, update_counter
    from idblocks_client.api.ids import batch, next_id
    from idblocks_client.models import BatchRequest, UpdateCounterRequest

    with RecordingServer() as server:
        client = Client(base_url=server.url + STAGE, httpx_args={"auth": SigV4(CREDENTIALS, REGION)})
        list_counters.sync_detailed(client=client, limit=5, cursor="eyJuYW1lIjogIm9yZGVycyJ9")
        batch.sync_detailed(NAME, client=client, body=BatchRequest(count=25), idempotency_key="key-1")
        next_id.sync_detailed(NAME, client=client)
        update_counter.sync_detailed(NAME, client=client, body=UpdateCounterRequest(next_=7000, cache=5))
    check_signed_as_botocore_signs(server.received)


@needs_api_tools
def test_the_fetch_middleware_recipe_signs_as_botocore(compiled_typescript):
    credentials = {
        "AWS_ACCESS_KEY_ID": CREDENTIALS.access_key,
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS.secret_key,
        "AWS_SESSION_TOKEN": CREDENTIALS.token,
        "AWS_REGION": REGION,
    }
    with RecordingServer() as server:
        run(
            ["node", compiled_typescript / "signed-requests.js"],
            env={"IDBLOCKS_URL": server.url + STAGE} | credentials,
        )
    check_signed_as_botocore_signs(server.received)


def test_the_other_languages_page_shows_the_code_these_tests_run():
    page = (ROOT / "docs" / "other-languages.md").read_text()
    for path in ("examples/generated_blocks.py", "examples/sigv4_httpx.py", "api-tools/src/sigv4.ts"):
        assert f'--8<-- "{path}"' in page, path
