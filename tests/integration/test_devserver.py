"""`make dev`: the dev server, run as a subprocess and used over real HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from devserver.process import DevServer, run_devserver, subprocess_environment
from localrun.dynamodb import EmbeddedDynamoDB, client
from localrun.tables import TABLE_NAMES
from localrun.template import ROOT


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
            {"counter": "orders", "start": 3, "end": 102, "count": 100, "step": 1},
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
        assert again.post("/counters/invoices/next").status_code == 404  # deleted: only an admin revives it
        assert again.post("/admin/counters", {"name": "invoices"}).json()["next"] == 5000
        assert again.post("/counters/invoices/next").json()["id"] == 5000


def test_unknown_routes_and_methods_get_the_gateways_answer_in_the_apis_shape(state_file):
    """SAM CLI's stand-in answered an unknown path or method with a bare 403
    {"message": "Missing Authentication Token"}, without the error shape or
    Cache-Control: no-store; the dev server answers as the deployed API
    Gateway does (template.yaml's GatewayResponses), and nothing is handed out.
    Its message said "...or the request is not signed with SigV4", on a
    server that never signs anything; it now names the unknown route."""
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
            # the dev server signs nothing: the route is all the message can mean
            message = reply.json()["error"]["message"]
            assert f"no route {reply.request.method} /" in message, message
            assert "dev server" in message
            assert reply.headers["Cache-Control"] == "no-store"
            assert reply.headers["Content-Type"] == "application/json"
        assert dev.post("/counters/orders/next").json()["id"] == 1  # none of them took an ID


def test_a_route_asked_with_the_wrong_method_is_told_the_method_it_takes(state_file):
    """GET /counters/x/batch answered "no route GET ..." without saying that
    batch takes POST."""
    with DevServer(state_file=state_file) as dev:
        for method, path, takes in [
            ("GET", "/counters/orders/batch", "/counters/{name}/batch takes POST"),
            ("PATCH", "/admin/counters/orders", "/admin/counters/{name} takes DELETE or GET or PUT"),
            ("DELETE", "/counters/orders/next", "/counters/{name}/next takes GET or POST"),
        ]:
            reply = requests.request(method, dev.url + path, timeout=30)
            assert (reply.status_code, reply.json()["error"]["code"]) == (403, "unknown_route_or_unsigned")
            assert takes in reply.json()["error"]["message"], reply.text


def test_a_slash_in_a_counter_name_is_an_invalid_name_not_an_unknown_route(state_file):
    """orders%2F2024 is one path segment: the route is next's, and the name
    is what is wrong (the function's check says invalid_name). werkzeug
    decoded the slash before routing, and the answer was "no route"."""
    with DevServer(state_file=state_file) as dev:
        for path in (
            "/counters/orders%2F2024/next",
            "/counters/orders%2f2024/batch",
            "/admin/counters/a%2Fb",
        ):
            method = "GET" if path.startswith("/admin") else "POST"
            body = {"count": 2} if path.endswith("batch") else None
            reply = requests.request(method, dev.url + path, json=body, timeout=30)
            assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_name"), (
                path,
                reply.text,
            )
        assert dev.post("/counters/orders/next").json()["id"] == 1  # nothing was handed out


def test_logs_each_request(state_file):
    with DevServer(state_file=state_file) as dev:
        dev.post("/counters/orders/next")
        dev.stop()
    log = "".join(dev.output)
    assert "POST /counters/orders/next -> NextFunction 200" in log


def test_the_log_escapes_control_characters_of_a_path(state_file):
    """The log wrote the decoded path raw: %0A started a line of the
    caller's choosing and %00 wrote a NUL into the log. Each request is
    still one line, its control characters escaped."""
    forged = "%0A12:00:00%20DELETE%20everything%20-%3E%20AdminFunction%20204%00"
    with DevServer(state_file=state_file) as dev:
        reply = requests.post(f"{dev.url}/counters/x{forged}/next", timeout=30)
        assert reply.status_code == 400  # not a name: the function refused it
        dev.stop()
    log = "".join(dev.output)
    assert "\x00" not in log
    assert not any(line.startswith("12:00:00 DELETE") for line in log.splitlines())
    assert (
        "/counters/x\\n12:00:00 DELETE everything -> AdminFunction 204\\x00/next -> NextFunction 400" in log
    )


def test_the_console_has_one_short_line_per_request_and_no_noise(state_file):
    """Each request printed its ~700-byte allocation record (4.6 MB after
    6.7k requests), each 204 "Lambda returned empty body!", and a request
    refused before any metric Powertools' "No application metrics" warning."""
    with DevServer(state_file=state_file) as dev:
        replies = [
            dev.post("/counters/orders/next"),
            dev.post("/admin/counters", {"name": "console", "start": 5}),
            dev.delete("/admin/counters/console"),
            dev.post("/counters/orders/batch", data="x", headers={"Content-Type": "text/plain"}),
        ]
        assert [reply.status_code for reply in replies] == [200, 201, 204, 415]
        dev.stop()
    after = dev.output[next(i for i, line in enumerate(dev.output) if line.startswith("ready: ")) + 1 :]
    assert after[-1].startswith("idblocks dev server stopped")
    lines = after[:-1]
    assert len(lines) == len(replies), "".join(lines)
    for line, reply in zip(lines, replies, strict=True):
        assert len(line) < 160, line
        assert reply.headers["x-amzn-RequestId"] in line  # the request's id, to find it by


def test_records_shows_each_allocation_record_with_its_own_request_id(state_file):
    """All 6,719 allocation records of a session carried one correlation id:
    SAM CLI gave every request the same requestId. Each record now has its
    request's, the one the answer's x-amzn-RequestId names."""
    with DevServer("--records", state_file=state_file) as dev:
        replies = [dev.post("/counters/orders/next") for _ in range(3)]
        dev.stop()
    records = [json.loads(line) for line in dev.output if line.startswith("{")]
    allocations = [record for record in records if record.get("message") == "allocation"]
    assert [record["correlation_id"] for record in allocations] == [
        r.headers["x-amzn-RequestId"] for r in replies
    ]
    assert [record["first_id"] for record in allocations] == [1, 2, 3]


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
        assert sorted(tables) == sorted(TABLE_NAMES.values())
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
        assert sorted(client(dynamodb.endpoint).list_tables()["TableNames"]) == sorted(TABLE_NAMES.values())
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
    # where, and how to start this one elsewhere
    assert_one_line_error(done, f"127.0.0.1:{port}", f'make dev DEV_ARGS="--port {port + 1}"')


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


# -- one owner per state file -------------------------------------------------


def test_a_second_dev_server_on_the_same_state_refuses_at_once(state_file):
    """Two dev servers on one state file each counted on from what they had
    loaded and both answered the same ID; the second must refuse to start,
    naming the first one's port and pid and the way to run two."""
    with DevServer(state_file=state_file) as first:
        assert first.post("/counters/orders/next").json()["id"] == 1
        second = DevServer(state_file=state_file, timeout=60)
        try:
            started = second.try_start()
        finally:
            if second.process is not None:
                second.stop()
        assert not started, "a second dev server started on the same state file"
        assert second.process.returncode == 2
        errors = [line for line in second.output if "error" in line]
        assert len(errors) == 1, second.output
        port = first.url.rsplit(":", 1)[1]
        assert f"port {port}" in errors[0]
        assert f"pid {first.process.pid}" in errors[0]
        assert "--state-file" in errors[0]
        assert "Traceback" not in "".join(second.output)
        # the first one is untouched and carries on
        assert first.post("/counters/orders/next").json()["id"] == 2


def test_two_dev_servers_started_together_on_one_state_one_wins(state_file):
    """Started at the same moment, exactly one of two servers gets the state."""
    servers = [DevServer(state_file=state_file) for _ in range(2)]
    outcome: dict[int, bool] = {}
    threads = [
        threading.Thread(target=lambda i=i: outcome.__setitem__(i, servers[i].try_start())) for i in range(2)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert sorted(outcome.values()) == [False, True], outcome
        winner = servers[next(i for i, ready in outcome.items() if ready)]
        assert winner.post("/counters/orders/next").json()["id"] == 1
    finally:
        for server in servers:
            if server.process is not None:
                server.stop()


def test_after_the_owner_is_killed_a_new_server_takes_over_without_repeating(state_file):
    """SIGKILL gives the owner no chance to clean up: the lock must still go
    with the process, and the next server continue above every ID handed out."""
    owner = DevServer(state_file=state_file).start()
    try:
        handed_out = [owner.post("/counters/orders/next").json()["id"] for _ in range(3)]
        batch = owner.post("/counters/orders/batch", {"count": 10}).json()
        handed_out += list(range(batch["start"], batch["end"] + 1))
        refused = DevServer(state_file=state_file)
        assert not refused.try_start(), "a second dev server started while the owner lived"
    finally:
        owner.stop(signal.SIGKILL)
    assert owner.process.returncode == -signal.SIGKILL
    with DevServer(state_file=state_file) as successor:
        after = [successor.post("/counters/orders/next").json()["id"] for _ in range(3)]
    assert min(after) > max(handed_out)
    assert len(set(handed_out + after)) == len(handed_out) + len(after)


def test_the_lock_does_not_stand_in_the_way_of_separate_state_files(tmp_path):
    with DevServer(state_file=tmp_path / "a.json") as a, DevServer(state_file=tmp_path / "b.json") as b:
        assert a.post("/counters/orders/next").json()["id"] == 1
        assert b.post("/counters/orders/next").json()["id"] == 1


# -- stopping -----------------------------------------------------------------


def _ignore_sigint() -> None:
    # What a non-interactive shell does to a background job (`make dev &`, nohup).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stops_cleanly_on_a_signal_even_when_started_with_sigint_ignored(state_file, sig):
    """A server started in the background inherits SIGINT ignored; it used to
    go on serving after `kill -INT`, and the test helpers then hung on it."""
    dev = DevServer(state_file=state_file, preexec_fn=_ignore_sigint).start()
    try:
        assert dev.post("/counters/orders/next").json()["id"] == 1
    finally:
        code = dev.stop(sig, grace=30)
    assert code == 0, "".join(dev.output)
    assert "idblocks dev server stopped" in dev.output[-1]
    saved = json.loads(state_file.read_text())["tables"]["CountersTable"]
    assert [item["hwm"]["N"] for item in saved] == ["1"]


@pytest.mark.parametrize(
    ("sig", "after"),
    [(signal.SIGINT, 0.0), (signal.SIGTERM, 0.0), (signal.SIGTERM, 0.4), (signal.SIGTERM, 1.2)],
)
def test_a_signal_during_start_stops_it_and_frees_the_state(state_file, sig, after):
    """A signal before the server is ready abandons the start cleanly, and the
    state file's lock goes with it; wherever in the start it lands (``after``
    seconds past the lock: tables, functions, the listening socket), it never
    surfaces as a traceback. It once did: raised from the handler, it could
    land in a finalizer, where Python prints it and carries on."""
    process = subprocess.Popen(
        [sys.executable, "-m", "devserver", "--port", "0", "--state-file", str(state_file)],
        cwd=ROOT,
        env=subprocess_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint,
    )
    try:
        # The lock file appears once main() runs, after the handlers are in place.
        lock = state_file.with_name(state_file.name + ".lock")
        for _ in range(600):
            if lock.exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(after)
        process.send_signal(sig)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == 0, out
    assert "Traceback" not in out
    assert "stopped" in out
    with DevServer(state_file=state_file) as after:
        assert after.post("/counters/orders/next").json()["id"] == 1


# The block under "Stopping it." in docs/development.md: what a script runs.
STOPPING = re.compile(r"^\*\*Stopping it\.\*\*.*?^```sh\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
# Generous bounds, for a busy machine: a start takes seconds, a stop less.
START_WITHIN, STOP_WITHIN = 300.0, 60.0


def _log_says_ready(log: Path, shell: subprocess.Popen[str]) -> str | None:
    """The URL the dev server logged as ready, once it has (None if the
    shell ended first or it is not ready within START_WITHIN)."""
    deadline = time.monotonic() + START_WITHIN
    while time.monotonic() < deadline and shell.poll() is None:
        found = re.search(r"^ready: (http://\S+)", log.read_text() if log.exists() else "", re.MULTILINE)
        if found:
            return found[1]
        time.sleep(0.05)
    return None


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dev_started_in_a_scripts_background_stops_as_the_development_page_says(tmp_path):
    """docs/development.md said `kill -INT` stops `make dev &`; from a
    script it stopped nothing: a non-interactive shell starts a background
    job with SIGINT ignored, and make keeps it ignored and passes no SIGINT
    on. The page's block runs as written in such a shell (bash reading it,
    no terminal), on a port and a counters file of its own, the test's wait
    for the server standing in for its comment line; it stops the server,
    counters saved, and nothing of it is left."""
    block = STOPPING.search((ROOT / "docs" / "development.md").read_text())
    assert block, "docs/development.md has no block under **Stopping it.**"
    lines = block["body"].splitlines()
    comment = next(i for i, line in enumerate(lines) if line.startswith("#"))
    log, state = tmp_path / "dev.log", tmp_path / "state.json"
    own = f"--port 0 --fresh --state-file {state}"
    before = [re.sub(r"--port \d+", own, line).replace("dev.log", str(log)) for line in lines[:comment]]
    assert any(line.startswith("make dev ") and own in line for line in before), before
    env = subprocess_environment()
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # no make of the tests' around it
        env.pop(name, None)
    shell = subprocess.Popen(
        ["bash"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: what is left of it can be found
    )
    assert shell.stdin is not None
    try:
        shell.stdin.write("\n".join(before) + "\n")
        shell.stdin.flush()
        url = _log_says_ready(log, shell)
        assert url, log.read_text() if log.exists() else "no log"
        assert requests.post(f"{url}/counters/orders/next", timeout=30).json()["id"] == 1
        out, _ = shell.communicate("\n".join(lines[comment + 1 :]) + "\n", timeout=STOP_WITHIN)
        assert shell.returncode == 0, out
        left = True
        try:
            os.killpg(shell.pid, 0)
        except ProcessLookupError:
            left = False
        assert not left, "a process of make dev is still running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(timeout=30)
    said = log.read_text()
    assert "idblocks dev server stopped" in said, said
    saved = json.loads(state.read_text())["tables"]["CountersTable"]
    assert [item["hwm"]["N"] for item in saved] == ["1"]
    with pytest.raises(requests.ConnectionError):
        requests.post(f"{url}/counters/orders/next", timeout=30)


# -- --fresh keeps what it replaces --------------------------------------------


def test_fresh_keeps_a_backup_of_the_state_it_replaces_and_says_where(state_file):
    """--fresh used to overwrite the saved counters with nothing to go back to."""
    with DevServer(state_file=state_file) as dev:
        dev.post("/counters/orders/batch", {"count": 50})
    before = state_file.read_text()
    with DevServer("--fresh", state_file=state_file) as fresh:
        assert fresh.post("/counters/orders/next").json()["id"] == 1
    backups = sorted(state_file.parent.glob(state_file.name + ".bak-*"))
    assert len(backups) == 1, backups
    assert backups[0].read_text() == before
    assert str(backups[0]) in "".join(fresh.output)
    # a second fresh start keeps its own backup, never overwriting the first
    with DevServer("--fresh", state_file=state_file):
        pass
    assert len(list(state_file.parent.glob(state_file.name + ".bak-*"))) == 2
    assert backups[0].read_text() == before
