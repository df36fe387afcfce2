"""The dev server authenticates as API Gateway does, when ClientAuth is given:
what a deployed stage refuses, it refuses with the same code and status (the
template's GatewayResponses), before any function runs, and says what to do;
what a deployed stage takes, it takes. Without ClientAuth (`make dev`), every
route answers unsigned requests, as the documented curl commands need."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import requests

from devserver.process import DevServer, run_devserver
from tests.support.signing import (
    ACCESS_KEY,
    REGION,
    SERVER_ENV,
    SESSION_ENV,
    TOKEN,
    iam_dev_server,
    send,
    sign,
    skewed,
)
from tests.support.waiting import wait_until

JSON = b'{"count": 3}'


def signed_send(method: str, url: str, body: bytes = b"", **signing) -> requests.Response:
    return send(method, url, body, sign(method, url, body, **signing))


def without(part: str) -> Callable[[dict[str, str]], dict[str, str]]:
    """Drop ``part`` (``, Signature=...`` say) from the Authorization header."""

    def edit(headers: dict[str, str]) -> dict[str, str]:
        headers["Authorization"] = re.sub(rf",\s*{part}=[^,]*", "", headers["Authorization"])
        return headers

    return edit


def unsign_host(headers: dict[str, str]) -> dict[str, str]:
    headers["Authorization"] = headers["Authorization"].replace(
        "SignedHeaders=content-type;host;", "SignedHeaders=content-type;"
    )
    return headers


def drop_date(headers: dict[str, str]) -> dict[str, str]:
    del headers["X-Amz-Date"]
    return headers


# (what is wrong, how the request is made from the dev server's URL) -> the
# code and x-amzn-ErrorType API Gateway answers it with, all with 403.
def mistakes(url: str) -> dict[str, tuple[Callable[[], requests.Response], str, str]]:
    next_url = f"{url}/counters/auth-orders/next"
    batch_url = f"{url}/counters/auth-orders/batch"
    list_url = f"{url}/admin/counters?limit=1"
    missing = ("unknown_route_or_unsigned", "MissingAuthenticationTokenException")
    incomplete = ("unknown_route_or_unsigned", "IncompleteSignatureException")
    invalid = ("invalid_signature", "InvalidSignatureException")
    denied = ("access_denied", "AccessDeniedException")

    def edited(edit: Callable[[dict[str, str]], dict[str, str]]) -> Callable[[], requests.Response]:
        return lambda: send("POST", next_url, b"", edit(sign("POST", next_url)))

    def skewed_by(minutes: float) -> Callable[[], requests.Response]:
        def request() -> requests.Response:
            with skewed(minutes):
                return signed_send("POST", next_url)

        return request

    return {
        "not signed at all": (lambda: send("POST", next_url), *missing),
        "a bearer token, not SigV4": (
            lambda: send("POST", next_url, headers={"Authorization": "Bearer x"}),
            *incomplete,
        ),
        "no Signature in Authorization": (edited(without("Signature")), *incomplete),
        "no SignedHeaders in Authorization": (edited(without("SignedHeaders")), *incomplete),
        "no X-Amz-Date": (edited(drop_date), *incomplete),
        "Host not among the signed headers": (edited(unsign_host), *incomplete),
        "a wrong secret key": (lambda: signed_send("POST", next_url, secret_key="not-the-secret"), *invalid),
        "signed for another region": (lambda: signed_send("POST", next_url, region="us-west-2"), *invalid),
        "signed for another service": (lambda: signed_send("POST", next_url, service="apigateway"), *invalid),
        "a clock six minutes behind": (skewed_by(-6), *invalid),
        "a clock six minutes ahead": (skewed_by(6), *invalid),
        "the body changed after signing": (
            lambda: send("POST", batch_url, b'{"count": 30}', sign("POST", batch_url, JSON)),
            *invalid,
        ),
        "the path changed after signing": (
            lambda: send("POST", next_url.replace("auth-orders", "auth-other"), b"", sign("POST", next_url)),
            *invalid,
        ),
        "the query changed after signing": (
            lambda: send("GET", list_url.replace("limit=1", "limit=2"), b"", sign("GET", list_url)),
            *invalid,
        ),
        "an access key it does not know": (
            lambda: signed_send("POST", next_url, access_key="AKIAUNKNOWNKEY000000"),
            *denied,
        ),
        "a session token with keys that have none": (
            lambda: signed_send("POST", next_url, token=TOKEN),
            *denied,
        ),
    }


MISTAKES = list(mistakes("http://unused"))


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_request_api_gateway_refuses_is_refused_with_its_code_and_nothing_runs(iam, mistake):
    """Each mistake gets the gateway's status, code and error type, before
    any function runs, and a message that says what to do."""
    make, code, error_type = mistakes(iam.url)[mistake]
    reply = make()
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == code, reply.text
    assert reply.headers["x-amzn-ErrorType"] == error_type
    assert reply.headers["Cache-Control"] == "no-store"
    message = reply.json()["error"]["message"]
    for fragment in ("SigV4", "execute-api", REGION):  # what it takes, and where
        assert fragment in message, message
    # the console's line for it: no function ran
    request_id = reply.headers["x-amzn-RequestId"]
    assert wait_until(lambda: any(request_id in line for line in iam.output))
    (line,) = [line for line in iam.output if request_id in line]
    assert " -> - 403 " in line, line


def test_none_of_the_refused_requests_reached_a_function(iam):
    for make, _, _ in mistakes(iam.url).values():
        assert make().status_code == 403
    # next and batch create their counter: had one run, it would exist
    for name in ("auth-orders", "auth-other"):
        reply = signed_send("GET", f"{iam.url}/admin/counters/{name}")
        assert reply.status_code == 404, reply.text


def test_every_route_takes_a_correctly_signed_request(iam):
    url = iam.url
    name = "auth-every-route"
    assert signed_send("POST", f"{url}/counters/{name}/next").json()["id"] == 1
    assert signed_send("GET", f"{url}/counters/{name}/next").json()["id"] == 2
    batch = signed_send("POST", f"{url}/counters/{name}/batch", JSON).json()
    assert (batch["start"], batch["end"]) == (3, 5)
    created = signed_send("POST", f"{url}/admin/counters", b'{"name": "auth-admin", "start": 10}')
    assert created.status_code == 201, created.text
    assert signed_send("GET", f"{url}/admin/counters/auth-admin").json()["next"] == 10
    assert signed_send("PUT", f"{url}/admin/counters/auth-admin", b'{"next": 20}').json()["next"] == 20
    page = signed_send("GET", f"{url}/admin/counters?limit=1").json()
    assert page["cursor"]
    after = signed_send("GET", f"{url}/admin/counters?limit=1&cursor={page['cursor']}")
    assert after.status_code == 200, after.text
    assert signed_send("DELETE", f"{url}/admin/counters/auth-admin").status_code == 204


def test_a_name_of_every_allowed_character_signs_and_verifies(iam):
    for name in (
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-",
        "..x",
        ".-_",
        "x" * 128,
    ):
        reply = signed_send("POST", f"{iam.url}/counters/{name}/next")
        assert reply.json() == {"counter": name, "id": 1}, reply.text


def test_the_banner_says_authentication_is_on_and_against_what(iam):
    banner = "".join(iam.output)
    assert "ClientAuth AWS_IAM" in banner
    assert f"access key {ACCESS_KEY} (AWS_ACCESS_KEY_ID)" in banner
    assert f"execute-api in {REGION}" in banner
    assert SERVER_ENV["AWS_SECRET_ACCESS_KEY"] not in banner  # never the developer's secret


def test_curl_signs_as_the_banner_shows(iam):
    """The banner's curl lines sign with curl's own SigV4 (--aws-sigv4)."""
    line = next(line for line in iam.output if "curl -X POST" in line and "/counters/orders/next" in line)
    assert "--aws-sigv4" in line
    secret = SERVER_ENV["AWS_SECRET_ACCESS_KEY"]
    argv = [
        arg.replace("$AWS_ACCESS_KEY_ID", ACCESS_KEY).replace("$AWS_SECRET_ACCESS_KEY", secret)
        for arg in shlex.split(line)
    ]
    done = subprocess.run([*argv, "-s"], capture_output=True, text=True, timeout=60, check=False)
    assert json.loads(done.stdout)["counter"] == "orders", done.stdout + done.stderr


# -- temporary credentials ----------------------------------------------------


def test_temporary_credentials_need_their_token_and_expire(tmp_path):
    past = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    future = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    state = tmp_path / "state.json"
    env = SESSION_ENV | {"AWS_CREDENTIAL_EXPIRATION": future}
    with iam_dev_server(state, env) as dev:
        url = f"{dev.url}/counters/auth-temporary/next"
        assert signed_send("POST", url, token=TOKEN).json()["id"] == 1
        for token in (None, "another-token"):
            refused = signed_send("POST", url, token=token)
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "access_denied")
    env = SESSION_ENV | {"AWS_CREDENTIAL_EXPIRATION": past}
    with DevServer("--parameter", "ClientAuth=AWS_IAM", state_file=state, env=env) as dev:
        refused = signed_send("POST", f"{dev.url}/counters/auth-temporary/next", token=TOKEN)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "expired_token"), refused.text
        assert refused.headers["x-amzn-ErrorType"] == "ExpiredTokenException"
        assert "refresh" in refused.json()["error"]["message"]


# -- API keys, and the admin routes ----------------------------------------------


def test_api_keys_for_next_and_batch_sigv4_for_admin(tmp_path):
    key = "k" * 40
    args = ("--fresh", "--parameter", "ClientAuth=API_KEY", "--api-key", key)
    with DevServer(*args, state_file=tmp_path / "state.json", env=SERVER_ENV) as dev:
        url = f"{dev.url}/counters/auth-keyed/next"
        assert send("POST", url, headers={"x-api-key": key}).json()["id"] == 1
        for headers in ({}, {"x-api-key": "k" * 39}, {"x-api-key": key + "k"}):
            refused = send("POST", url, headers=headers)
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "invalid_api_key"), headers
            assert refused.headers["x-amzn-ErrorType"] == "ForbiddenException"
            assert "x-api-key" in refused.json()["error"]["message"]
        # the admin routes take SigV4 whatever ClientAuth says, an API key or not
        admin = f"{dev.url}/admin/counters/auth-keyed"
        refused = send("GET", admin, headers={"x-api-key": key})
        assert refused.json()["error"]["code"] == "unknown_route_or_unsigned"
        assert "admin route" in refused.json()["error"]["message"]
        assert signed_send("GET", admin).json()["next"] == 2
        assert f"API key   {key}" in "".join(dev.output)


def test_an_api_key_is_made_and_printed_when_none_is_given(tmp_path):
    with DevServer("--fresh", "--parameter", "ClientAuth=API_KEY", state_file=tmp_path / "s.json") as dev:
        (key,) = re.findall(r"export IDBLOCKS_API_KEY=(\S+)\)", "".join(dev.output))
        assert (
            send("POST", f"{dev.url}/counters/auth-made/next", headers={"x-api-key": key}).status_code == 200
        )


def test_with_no_credentials_a_key_pair_is_made_and_printed(tmp_path):
    nowhere = str(tmp_path / "none")
    env = {"AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere}
    with iam_dev_server(tmp_path / "s.json", env) as dev:
        (pair,) = re.findall(
            r"export (AWS_ACCESS_KEY_ID=\S+ AWS_SECRET_ACCESS_KEY=\S+ AWS_REGION=\S+)", "".join(dev.output)
        )
        made = dict(item.split("=", 1) for item in pair.split())
        url = f"{dev.url}/counters/auth-made/next"
        reply = signed_send(
            "POST",
            url,
            access_key=made["AWS_ACCESS_KEY_ID"],
            secret_key=made["AWS_SECRET_ACCESS_KEY"],
            region=made["AWS_REGION"],
        )
        assert reply.json()["id"] == 1, reply.text


# -- off by default ---------------------------------------------------------------


def test_make_dev_with_no_arguments_answers_unsigned_requests_and_says_so(tmp_path):
    with DevServer("--fresh", state_file=tmp_path / "s.json") as dev:
        assert dev.post("/counters/orders/next").json()["id"] == 1
        assert dev.post("/admin/counters", {"name": "invoices", "start": 1000}).status_code == 201
        assert dev.get("/admin/counters/invoices").status_code == 200
        assert "Auth      off" in "".join(dev.output)


def test_client_auth_none_leaves_next_open_and_signs_admin(tmp_path):
    with DevServer(
        "--fresh", "--parameter", "ClientAuth=NONE", state_file=tmp_path / "s.json", env=SERVER_ENV
    ) as dev:
        assert dev.post("/counters/orders/next").json()["id"] == 1
        refused = dev.get("/admin/counters/orders")
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "unknown_route_or_unsigned")
        assert signed_send("GET", f"{dev.url}/admin/counters/orders").json()["next"] == 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--parameter", "ClientAuth=iam"], "AWS_IAM, API_KEY, NONE"),
        (["--api-key", "x" * 40], "ClientAuth"),
        (["--region", "eu-west-1"], "ClientAuth"),
    ],
)
def test_auth_options_that_cannot_apply_are_refused(tmp_path, args, fragment):
    done = run_devserver(*args, "--state-file", str(tmp_path / "s.json"))
    assert done.returncode == 2
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
