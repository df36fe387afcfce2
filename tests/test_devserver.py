"""`make dev`: the dev server, run as a subprocess and used over real HTTP."""

from __future__ import annotations

import json
import signal
import socket

import pytest
import requests

from devserver.__main__ import LOCAL_TABLE_NAMES
from devserver.dynamodb import EmbeddedDynamoDB, client
from tests.support.devserver import DevServer, run_devserver


@pytest.fixture
def state_file(tmp_path):
    return tmp_path / "state" / "dynamodb.json"


def test_every_route_over_http_then_a_restart_carries_on(state_file):
    with DevServer(state_file=state_file) as dev:
        assert dev.post("/counters/orders/next").json() == {"counter": "orders", "id": 1}
        assert dev.get("/counters/orders/next").json() == {"counter": "orders", "id": 2}
        batch = dev.post("/counters/orders/batch", {"count": 100})
        assert (batch.status_code, batch.json()) == (
            200,
            {"counter": "orders", "start": 3, "end": 102, "count": 100},
        )
        assert batch.headers["Cache-Control"] == "no-store"

        created = dev.post("/admin/counters", {"name": "invoices", "start": 1000})
        assert (created.status_code, created.json()["next"]) == (201, 1000)
        assert dev.get("/admin/counters/invoices").json()["next"] == 1000
        listed = dev.get("/admin/counters", params={"limit": "10"}).json()
        assert sorted(c["name"] for c in listed["counters"]) == ["invoices", "orders"]
        assert dev.put("/admin/counters/invoices", {"next": 5000}).json()["next"] == 5000
        assert dev.put("/admin/counters/invoices", {"next": 10}).status_code == 409
        assert dev.delete("/admin/counters/invoices").status_code == 204
        assert dev.get("/admin/counters/invoices").status_code == 404

        bad = dev.post("/counters/orders/batch", data="{", headers={"Content-Type": "application/json"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_json")

        openapi = dev.get("/openapi.json")
        assert openapi.status_code == 200
        assert "/counters/{name}/batch" in openapi.json()["paths"]
        assert dev.stop() == 0
    assert "stopped" in dev.output[-1]
    assert json.loads(state_file.read_text())["format"] == "idblocks-dev-state"

    with DevServer(state_file=state_file) as again:
        assert "2 counter(s) restored" in "".join(again.output)
        assert again.post("/counters/orders/next").json() == {"counter": "orders", "id": 103}
        # the deleted counter's high-water mark survived too
        assert again.post("/admin/counters", {"name": "invoices", "start": 4999}).status_code == 409
        assert again.post("/counters/invoices/next").json()["id"] == 5000


def test_unknown_routes_and_methods_get_the_gateways_answer_in_the_apis_shape(state_file):
    """SAM CLI's stand-in answered an unknown path or method with a bare 403
    {"message": "Missing Authentication Token"}, without the error shape or
    Cache-Control: no-store; the dev server answers as the deployed API
    Gateway does (template.yaml's GatewayResponses), and nothing is handed out."""
    with DevServer(state_file=state_file) as dev:
        base = dev.url
        answers = [
            requests.get(f"{base}/nope", timeout=30),
            requests.post(f"{base}/counters/orders/nothing", timeout=30),
            requests.delete(f"{base}/counters/orders/next", timeout=30),
            requests.patch(f"{base}/admin/counters/orders", json={"next": 5}, timeout=30),
            requests.put(f"{base}/counters/orders/batch", json={"count": 5}, timeout=30),
        ]
        for reply in answers:
            assert reply.status_code == 403, reply.request.method
            assert reply.json()["error"]["code"] == "unknown_route_or_unsigned"
            assert reply.json()["error"]["message"]
            assert reply.headers["Cache-Control"] == "no-store"
            assert reply.headers["Content-Type"] == "application/json"
        assert dev.post("/counters/orders/next").json()["id"] == 1  # none of them took an ID


def test_logs_each_request(state_file):
    with DevServer(state_file=state_file) as dev:
        dev.post("/counters/orders/next")
        dev.stop()
    log = "".join(dev.output)
    assert "POST /counters/orders/next -> NextFunction 200" in log


def test_state_survives_a_crash(state_file):
    dev = DevServer(state_file=state_file).start()
    ids = [dev.post("/counters/orders/next").json()["id"] for _ in range(3)]
    dev.stop(signal.SIGKILL)  # no chance to save on the way out
    with DevServer(state_file=state_file) as again:
        assert again.post("/counters/orders/next").json()["id"] == ids[-1] + 1


def test_fresh_starts_empty_and_replaces_the_state(state_file):
    with DevServer(state_file=state_file) as dev:
        dev.post("/counters/orders/batch", {"count": 50})
    with DevServer("--fresh", state_file=state_file) as fresh:
        assert fresh.post("/counters/orders/next").json()["id"] == 1
    with DevServer(state_file=state_file) as after:
        assert after.post("/counters/orders/next").json()["id"] == 2


def test_template_parameters_apply(state_file):
    with DevServer("--parameter", "AutoCreateCounters=false", state_file=state_file) as dev:
        reply = dev.post("/counters/orders/next")
        assert (reply.status_code, reply.json()["error"]["code"]) == (404, "counter_not_found")


def test_an_existing_dynamodb_by_endpoint(tmp_path):
    dynamodb = EmbeddedDynamoDB().start()  # stands in for DynamoDB Local
    try:
        state_file = tmp_path / "unused.json"
        with DevServer("--dynamodb-endpoint", dynamodb.endpoint, state_file=state_file) as dev:
            assert dev.post("/counters/orders/batch", {"count": 7}).json()["end"] == 7
        assert not state_file.exists()  # that DynamoDB keeps its own state
        tables = client(dynamodb.endpoint).list_tables()["TableNames"]
        assert sorted(tables) == sorted(LOCAL_TABLE_NAMES.values())
        assert [item["hwm"]["N"] for item in dynamodb.items("idblocks-counters")] == ["7"]
        with DevServer("--dynamodb-endpoint", dynamodb.endpoint) as again:
            assert again.post("/counters/orders/next").json()["id"] == 8
    finally:
        dynamodb.stop()


def test_create_tables_only(tmp_path):
    dynamodb = EmbeddedDynamoDB().start()
    try:
        done = run_devserver("--dynamodb-endpoint", dynamodb.endpoint, "--create-tables-only")
        assert done.returncode == 0, done.stderr
        assert sorted(client(dynamodb.endpoint).list_tables()["TableNames"]) == sorted(
            LOCAL_TABLE_NAMES.values()
        )
    finally:
        dynamodb.stop()


# -- bad command-line input: one line, non-zero, no traceback -----------------


def assert_one_line_error(done, *fragments):
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0]


def test_port_in_use(state_file):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_devserver("--port", str(port), "--state-file", str(state_file))
    assert_one_line_error(done, f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--port", "99999"], "port"),
        (["--port", "http"], "port"),
        (["--dynamodb-endpoint", "ftp://example"], "URL"),
        (["--dynamodb-endpoint", "http://127.0.0.1:9"], "cannot reach DynamoDB"),
        (["--parameter", "NoSuchParameter=1"], "NoSuchParameter"),
        (["--parameter", "novalue"], "NAME=VALUE"),
        (["--create-tables-only"], "--dynamodb-endpoint"),
    ],
)
def test_bad_arguments(args, fragment, state_file):
    done = run_devserver(*args, "--state-file", str(state_file))
    assert_one_line_error(done, fragment)


@pytest.mark.parametrize(
    "content",
    ["{not json", '{"format": "something-else", "version": 1, "tables": {}}', "[]", ""],
)
def test_a_corrupt_state_file_is_reported_and_left_alone(state_file, content):
    state_file.parent.mkdir(parents=True)
    state_file.write_text(content)
    done = run_devserver("--state-file", str(state_file))
    assert_one_line_error(done, str(state_file), "--fresh")
    assert state_file.read_text() == content


def test_an_unreadable_state_file_is_reported(tmp_path):
    directory = tmp_path / "a-directory"
    directory.mkdir()
    done = run_devserver("--state-file", str(directory))
    assert_one_line_error(done, "cannot read state file")
