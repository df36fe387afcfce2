"""The dev server authenticates as API Gateway does, when ClientAuth is given:
what a deployed stage refuses, it refuses with the same code and status (the
template's GatewayResponses), before any function runs, and says what to do;
what a deployed stage takes, it takes. Without ClientAuth (`make dev`), every
route answers unsigned requests, as the documented curl commands need."""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from devserver.process import DevServer, run_devserver
from tests.support.signing import (
    ACCESS_KEY,
    ADMIN_KEY,
    CLIENT_KEY,
    REGION,
    SECRET_KEY,
    SERVER_ENV,
    SESSION_ENV,
    TOKEN,
    iam_dev_server,
    identity,
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


# -- identities: who may call what, evaluated as IAM does --------------------------

SERVICE_KEY = ("AKIASERVICEPOLICY001", "service-policy-secret")
# A service's own role's policy, as written for the deployed API it calls
# (its id and account): the dev server is told them (--api-id, --account).
DEPLOYED_API = ("a1b2c3d4e5", "111122223333")
SERVICE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "TakeOrders",
            "Effect": "Allow",
            "Action": "execute-api:Invoke",
            "Resource": f"arn:aws:execute-api:{REGION}:{DEPLOYED_API[1]}:{DEPLOYED_API[0]}"
            "/v1/POST/counters/orders*",
        },
        {
            "Sid": "NeverTheEuOnes",
            "Effect": "Deny",
            "Action": "execute-api:*",
            "Resource": f"arn:aws:execute-api:*:*:{DEPLOYED_API[0]}/*/*/counters/orders.eu*",
        },
    ],
}
ADMIN_CALLS = [
    ("POST", "/admin/counters", b'{"name": "guarded-never"}'),
    ("GET", "/admin/counters", b""),
    ("GET", "/admin/counters/orders.eu", b""),
    ("PUT", "/admin/counters/orders.eu", b'{"next": 1000}'),
    ("DELETE", "/admin/counters/orders.eu", b""),
]


def as_key(key: tuple[str, str]) -> dict[str, str]:
    return {"access_key": key[0], "secret_key": key[1]}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory):
    """ClientAuth AWS_IAM with a client identity (ClientCounters orders.eu),
    an admin identity and a service identity with a policy file of its own."""
    folder = tmp_path_factory.mktemp("guarded")
    service_policy = folder / "service-policy.json"
    service_policy.write_text(json.dumps(SERVICE_POLICY))
    args = [
        "--parameter",
        "ClientCounters=orders.eu",
        "--api-id",
        DEPLOYED_API[0],
        "--account",
        DEPLOYED_API[1],
        *identity("client", CLIENT_KEY),
        *identity("admin", ADMIN_KEY),
        *identity(str(service_policy), SERVICE_KEY),
    ]
    with iam_dev_server(folder / "state.json", args=args) as server:
        yield server


def console_line(dev: DevServer, reply: requests.Response, fragment: str) -> str:
    """The console's line with ``fragment`` logged before ``reply``'s own."""
    request_id = reply.headers["x-amzn-RequestId"]
    assert wait_until(lambda: any(request_id in line for line in dev.output))
    lines = dev.output[: next(i for i, line in enumerate(dev.output) if request_id in line) + 1]
    assert " -> - 403 " in lines[-1], lines[-1]  # no function ran
    return next(line for line in reversed(lines) if fragment in line)


def assert_access_denied(reply: requests.Response) -> str:
    assert reply.status_code == 403, reply.text
    assert reply.json()["error"]["code"] == "access_denied", reply.text
    assert reply.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert reply.headers["Cache-Control"] == "no-store"
    return reply.json()["error"]["message"]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS, ids=[f"{m} {p}" for m, p, _ in ADMIN_CALLS])
def test_a_client_identity_calling_an_admin_route_is_refused_as_api_gateway_refuses_it(
    guarded, method, path, body
):
    """A service whose role will carry only the stack's ClientPolicy called
    every admin route locally (200), and learned otherwise only in AWS."""
    reply = signed_send(method, guarded.url + path, body, **as_key(CLIENT_KEY))
    message = assert_access_denied(reply)
    resource = f"arn:aws:execute-api:{REGION}:{DEPLOYED_API[1]}:{DEPLOYED_API[0]}/v1/{method}{path}"
    assert f"is not authorized to perform: execute-api:Invoke on resource: {resource}" in message
    assert "no statement of ClientPolicy of template.yaml allows it" in message
    line = console_line(guarded, reply, "access denied")
    assert f"identity client ({CLIENT_KEY[0]}) execute-api:Invoke on {resource}" in line
    assert "no statement of ClientPolicy of template.yaml allows it" in line


def test_a_client_identity_takes_ids_of_its_counters_and_of_no_other(guarded):
    url = guarded.url
    assert signed_send("POST", f"{url}/counters/orders.eu/next", **as_key(CLIENT_KEY)).json()["id"] == 1
    assert signed_send("GET", f"{url}/counters/orders.eu/next", **as_key(CLIENT_KEY)).json()["id"] == 2
    batch = signed_send("POST", f"{url}/counters/orders.eu/batch", JSON, **as_key(CLIENT_KEY))
    assert (batch.json()["start"], batch.json()["end"]) == (3, 5)
    # prefixes that share a beginning, and a dot that is only a dot
    for name in ("ordersXeu", "orders", "orders.eu2", "Orders.eu"):
        for route, body in (("next", b""), ("batch", JSON)):
            reply = signed_send("POST", f"{url}/counters/{name}/{route}", body, **as_key(CLIENT_KEY))
            assert_access_denied(reply)
        # nothing ran: next and batch would have created the counter
        assert signed_send("GET", f"{url}/admin/counters/{name}").status_code == 404


def test_an_admin_identity_calls_every_admin_route_and_takes_no_ids(guarded):
    url = guarded.url
    created = signed_send("POST", f"{url}/admin/counters", b'{"name": "guarded-admin"}', **as_key(ADMIN_KEY))
    assert created.status_code == 201, created.text
    assert signed_send("GET", f"{url}/admin/counters", **as_key(ADMIN_KEY)).status_code == 200
    assert signed_send("GET", f"{url}/admin/counters/guarded-admin", **as_key(ADMIN_KEY)).json()["next"] == 1
    moved = signed_send("PUT", f"{url}/admin/counters/guarded-admin", b'{"next": 9}', **as_key(ADMIN_KEY))
    assert moved.json()["next"] == 9
    for route, body in (("next", b""), ("batch", JSON)):
        reply = signed_send("POST", f"{url}/counters/guarded-admin/{route}", body, **as_key(ADMIN_KEY))
        assert "no statement of AdminPolicy of template.yaml allows it" in assert_access_denied(reply)
    assert (
        signed_send("DELETE", f"{url}/admin/counters/guarded-admin", **as_key(ADMIN_KEY)).status_code == 204
    )


def test_the_dev_servers_own_credentials_still_call_every_route(guarded):
    url = guarded.url
    assert signed_send("POST", f"{url}/counters/guarded-own/next").json()["id"] == 1
    assert signed_send("POST", f"{url}/counters/guarded-own/batch", JSON).json()["start"] == 2
    assert signed_send("GET", f"{url}/admin/counters/guarded-own").json()["next"] == 5
    assert signed_send("DELETE", f"{url}/admin/counters/guarded-own").status_code == 204


def test_a_policy_of_ones_own_is_evaluated_and_its_explicit_deny_wins(guarded):
    url = guarded.url
    assert signed_send("POST", f"{url}/counters/orders-service/next", **as_key(SERVICE_KEY)).json()["id"] == 1
    refused = signed_send("POST", f"{url}/counters/orders.eu-service/next", **as_key(SERVICE_KEY))
    message = assert_access_denied(refused)
    assert "with an explicit deny" in message
    line = console_line(guarded, refused, "access denied")
    assert f"service-policy.json ({SERVICE_KEY[0]}) execute-api:Invoke on arn:" in line
    assert "statement 'NeverTheEuOnes' of " in line
    assert "service-policy.json denies it" in line
    # GET next is not in its policy
    assert_access_denied(signed_send("GET", f"{url}/counters/orders-service/next", **as_key(SERVICE_KEY)))


def test_the_banner_lists_each_identity_and_what_it_may_call(guarded):
    banner = "".join(
        guarded.output[: next(i for i, line in enumerate(guarded.output) if line.startswith("ready"))]
    )
    client = next(line for line in banner.splitlines() if "Identity  client" in line)
    assert CLIENT_KEY[0] in client
    assert (
        "POST /counters/orders.eu/next, GET /counters/orders.eu/next, POST /counters/orders.eu/batch"
        in client
    )
    admin = next(line for line in banner.splitlines() if "Identity  admin" in line)
    assert "* /admin/counters, * /admin/counters/*" in admin
    service = next(line for line in banner.splitlines() if SERVICE_KEY[0] in line)
    assert "POST /counters/orders*" in service
    assert "never " in service
    assert f"{ACCESS_KEY} (AWS_ACCESS_KEY_ID): every route" in banner
    assert f"{DEPLOYED_API[1]}:{DEPLOYED_API[0]}/v1/<METHOD>/<path>" in banner
    for secret in (CLIENT_KEY[1], ADMIN_KEY[1], SERVICE_KEY[1], SECRET_KEY):
        assert secret not in banner


def refused_at_start(tmp_path: Path, *args: str, policy: object = None) -> str:
    if policy is not None:
        (tmp_path / "policy.json").write_text(json.dumps(policy))
    done = run_devserver(*args, "--state-file", str(tmp_path / "s.json"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.json").exists()
    return done.stderr


IAM = ("--parameter", "ClientAuth=AWS_IAM")


@pytest.mark.parametrize(
    ("args", "policy", "said"),
    [
        (
            [*IAM, "--identity", "{policy}=AKIAPOLICY1:x"],
            {"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bool": {}}}},
            "has a Condition, which the dev server does not evaluate",
        ),
        (
            [*IAM, "--identity", "{policy}=AKIAPOLICY1:x"],
            {
                "Statement": {
                    "Effect": "Allow",
                    "Action": "*",
                    "Resource": "arn:aws:execute-api:*:*:${aws:username}",
                }
            },
            "holds a policy variable",
        ),
        (
            [*IAM, "--identity", "{policy}=AKIAPOLICY1:x"],
            "not json",
            "is not JSON",
        ),
        ([*IAM, "--identity", "missing.json=AKIAPOLICY1:x"], None, "cannot read the policy missing.json"),
        (
            ["--parameter", "ClientAuth=API_KEY", "--identity", "client=AKIAPOLICY1:x"],
            None,
            "creates ClientPolicy only when its condition ClientAuthIsIam holds",
        ),
        (["--identity", "admin=AKIAPOLICY1:x"], None, "apply with --parameter ClientAuth"),
        ([*IAM, "--identity", "admin=AKIAPOLICY1"], None, "ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY"),
        (
            [*IAM, "--identity", "admin=AKIAPOLICY1:x", "--identity", "client=AKIAPOLICY1:y"],
            None,
            "two identities",
        ),
        ([*IAM, "--api-id", "not-an-id!"], None, "an API id is letters and digits"),
        ([*IAM, "--account", "1234"], None, "an AWS account is 12 digits"),
    ],
    ids=[
        "a condition",
        "a policy variable",
        "not JSON",
        "no such file",
        "no client policy under API_KEY",
        "no ClientAuth",
        "no secret",
        "one key twice",
        "an API id",
        "an account",
    ],
)
def test_what_the_dev_server_would_not_evaluate_as_iam_does_stops_it_saying_why(tmp_path, args, policy, said):
    given = [arg.replace("{policy}", str(tmp_path / "policy.json")) for arg in args]
    if isinstance(policy, str):
        (tmp_path / "policy.json").write_text(policy)
        policy = None
    assert said in refused_at_start(tmp_path, *given, policy=policy)


def test_the_dev_servers_own_key_cannot_be_an_identitys(tmp_path):
    args = (*IAM, "--identity", f"client={ACCESS_KEY}:x", "--state-file", str(tmp_path / "s.json"))
    done = run_devserver(*args, env=SERVER_ENV)
    assert done.returncode == 2
    assert "is the dev server's own" in done.stderr


# -- the key pair made for a developer with none -------------------------------------


def test_the_key_pair_made_with_no_credentials_works_after_a_restart(tmp_path):
    """With no credentials a key pair is made and printed, and the exported
    pair signs requests. It was made anew at every start: the pair stopped
    working after a restart. It is kept beside the state (0600); --fresh
    empties the tables and keeps it."""
    nowhere = str(tmp_path / "none")
    env = {"AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere}
    state = tmp_path / "dev-state" / "s.json"
    pairs, ids = [], []
    for args in ((), (), ("--fresh",)):
        with DevServer(*IAM, *args, state_file=state, env=env) as dev:
            (pair,) = re.findall(
                r"export AWS_ACCESS_KEY_ID=(\S+) AWS_SECRET_ACCESS_KEY=(\S+) AWS_REGION=(\S+)",
                "".join(dev.output),
            )
            pairs.append(pair)
            access_key, secret_key, region = pairs[0]
            reply = signed_send(
                "POST",
                f"{dev.url}/counters/kept/next",
                access_key=access_key,
                secret_key=secret_key,
                region=region,
            )
            assert reply.status_code == 200, reply.text
            ids.append(reply.json()["id"])
    assert pairs[0] == pairs[1] == pairs[2]
    assert ids == [1, 2, 1]  # the state kept, then emptied by --fresh
    kept = tmp_path / "dev-state" / "credentials"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert pairs[0][1] in kept.read_text()
