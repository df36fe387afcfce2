"""What the dev server takes from SAM CLI, which is not SAM CLI's public API.
If an aws-sam-cli upgrade changes any of it, these fail and say what moved."""

from __future__ import annotations

import inspect
import json
import time
import uuid
from importlib.metadata import version

import pytest
from samcli.lib.providers.api_provider import ApiProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider
from samcli.lib.utils.stream_writer import StreamWriter
from samcli.local.apigw.local_apigw_service import LocalApigwService

from devserver.server import InProcessRunner, create_app, load_api
from localrun.template import ROOT, FunctionSpec
from tests.infra.test_template import EXPECTED_ROUTES


def pinned(package: str) -> str:
    for line in (ROOT / "requirements" / "dev.txt").read_text().splitlines():
        name, _, pin = line.partition("==")
        if name.split("[")[0].strip() == package:
            return pin.strip()
    raise AssertionError(f"{package} is not pinned in requirements/dev.txt")


def test_the_installed_sam_cli_is_the_pinned_one():
    assert version("aws-sam-cli") == pinned("aws-sam-cli"), (
        "aws-sam-cli changed: check devserver/server.py against the new version, then update the pin"
    )


def test_the_signatures_the_dev_server_calls_are_unchanged():
    service = inspect.signature(LocalApigwService.__init__).parameters
    assert {"api", "lambda_runner", "stderr"} <= set(service)
    assert callable(LocalApigwService.create)
    event = inspect.signature(LocalApigwService._generate_lambda_event).parameters
    assert list(event) == ["self", "flask_request", "route", "method", "endpoint"]
    stacks = inspect.signature(SamLocalStackProvider.get_stacks).parameters
    assert {"template_dictionary", "parameter_overrides", "language_extensions_enabled"} <= set(stacks)
    assert callable(StreamWriter.write_str)


def test_sam_reads_the_templates_routes():
    api = load_api(ROOT / "template.yaml", {})
    found = {(method, route.path): route.function_name for route in api.routes for method in route.methods}
    assert found == EXPECTED_ROUTES


def test_the_api_from_the_parsed_template_is_the_api_sam_reads_from_the_file():
    """load_api hands SAM CLI the template parsed (and cached) as SAM CLI
    parses it, with no file: SAM CLI reads the same routes, events and all,
    as from the file, where a path it resolved against the file would show."""
    parameters = {"ClientAuth": "API_KEY"}
    stacks, _ = SamLocalStackProvider.get_stacks(
        str(ROOT / "template.yaml"), parameter_overrides=parameters, language_extensions_enabled=True
    )
    from_file = ApiProvider(stacks, cwd=str(ROOT)).api
    given = load_api(ROOT / "template.yaml", parameters)
    assert {name: getattr(given, name) for name in vars(given)} == {
        name: getattr(from_file, name) for name in vars(from_file)
    }
    by_route = lambda route: (route.path, sorted(route.methods))  # noqa: E731
    assert [vars(route) for route in sorted(given.routes, key=by_route)] == [
        vars(route) for route in sorted(from_file.routes, key=by_route)
    ]


class RecordingRunner(InProcessRunner):
    """Records what LocalApigwService passes to its Lambda runner."""

    def __init__(self):
        super().__init__({})
        self.calls = []

    def invoke(self, function_identifier, event, stdout=None, stderr=None, **kwargs):
        self.calls.append((function_identifier, json.loads(event), kwargs))
        reply = {"statusCode": 201, "headers": {"X-Seen": "yes"}, "body": json.dumps({"ok": True})}
        stdout.write_str(json.dumps(reply))


@pytest.fixture
def recorded():
    runner = RecordingRunner()
    app = create_app(load_api(ROOT / "template.yaml", {}), runner, {"openapi": "3.1.0"})
    return runner, app.test_client()


def test_requests_become_api_gateway_proxy_events(recorded):
    runner, http = recorded
    response = http.post(
        "/counters/orders/batch?x=1",
        data='{"count": 5}',
        headers={"Content-Type": "application/json", "Idempotency-Key": "k-1"},
    )
    # the runner's reply becomes the HTTP response
    assert response.status_code == 201
    assert response.headers["X-Seen"] == "yes"
    assert response.get_json() == {"ok": True}

    ((function, event, _),) = runner.calls
    assert function == "BatchFunction"
    assert event["httpMethod"] == "POST"
    assert event["resource"] == "/counters/{name}/batch"
    assert event["path"] == "/counters/orders/batch"
    assert event["pathParameters"] == {"name": "orders"}
    assert event["queryStringParameters"] == {"x": "1"}
    assert event["multiValueQueryStringParameters"] == {"x": ["1"]}
    assert json.loads(event["body"]) == {"count": 5}
    assert event["isBase64Encoded"] is False
    assert event["headers"]["Idempotency-Key"] == "k-1"
    assert event["multiValueHeaders"]["Idempotency-Key"] == ["k-1"]
    context = event["requestContext"]
    assert context["resourcePath"] == "/counters/{name}/batch"
    assert context["httpMethod"] == "POST"
    assert "sourceIp" in context["identity"]


@pytest.mark.parametrize(("method", "path"), sorted(EXPECTED_ROUTES, key=str))
def test_every_template_route_reaches_its_function(recorded, method, path):
    runner, http = recorded
    http.open(path.replace("{name}", "orders"), method=method)
    ((function, event, _),) = runner.calls
    assert function == EXPECTED_ROUTES[(method, path)]
    assert event["resource"] == path


def test_unknown_routes_never_reach_a_function(recorded):
    runner, http = recorded
    assert http.get("/counters").status_code in (403, 404)
    assert http.delete("/counters/orders/next").status_code in (403, 404, 405)
    assert runner.calls == []


def test_openapi_is_served(recorded):
    _, http = recorded
    assert http.get("/openapi.json").get_json() == {"openapi": "3.1.0"}


def test_a_body_that_is_not_utf8_is_a_400_not_sams_502(recorded):
    runner, http = recorded
    response = http.post(
        "/admin/counters", data=b"\xdc\xa97@\xff", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_body"
    assert runner.calls == []


# A handler that answers what it was left of its Timeout: given none, it has
# run its whole Timeout by the time it returns, with no clock to wait on.
PROBE = """
def lambda_handler(event, context):
    return {"statusCode": 200, "body": str(context.get_remaining_time_in_millis())}
"""


@pytest.mark.parametrize(("timeout", "status"), [(0.0, 500), (600.0, 200)])
def test_a_handler_that_runs_its_whole_timeout_fails_as_in_lambda(tmp_path, timeout, status):
    """Lambda stops a function at its Timeout and the invocation fails (API
    Gateway answers 502; SAM CLI's stand-in answers a failed invocation 500,
    as for a handler that raised). The dev server answered whatever the
    handler returned, however late, so a request that overran its Timeout
    passed locally."""
    (tmp_path / "app.py").write_text(PROBE)
    # A logical id of its own: handler modules are loaded once per id.
    spec = FunctionSpec(f"TimeoutProbe{uuid.uuid4().hex}", tmp_path, "app", "lambda_handler", (), timeout)
    runner = InProcessRunner({"NextFunction": spec})
    http = create_app(load_api(ROOT / "template.yaml", {}), runner, {}).test_client()
    response = http.post("/counters/orders/next")
    assert response.status_code == status, response.text


def test_each_request_has_its_own_request_id_and_time_as_api_gateway_gives_them(recorded):
    """SAM CLI's events carried one requestId and one requestTimeEpoch for a
    whole server's life (defaults evaluated once), so every allocation
    record of a session had the same correlation id."""
    runner, http = recorded
    before = int(time.time() * 1000)
    replies = [http.post("/counters/orders/next") for _ in range(3)]
    after = int(time.time() * 1000)
    contexts = [event["requestContext"] for _, event, _ in runner.calls]
    assert len({context["requestId"] for context in contexts}) == 3
    assert len({context["extendedRequestId"] for context in contexts}) == 3
    assert all(context["extendedRequestId"] for context in contexts)
    epochs = [context["requestTimeEpoch"] for context in contexts]
    assert before <= epochs[0] <= epochs[1] <= epochs[2] <= after
    # API Gateway names each answer by its request's id
    assert [reply.headers["x-amzn-RequestId"] for reply in replies] == [c["requestId"] for c in contexts]
