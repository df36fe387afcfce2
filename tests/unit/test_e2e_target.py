"""How make test-deployed finds the URL to test: the stack's ApiUrl output,
read through a stubbed CloudFormation (no AWS account is needed)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from tests.e2e.deployed import USAGE, parse_args, resolve_url
from tests.e2e.target import ClientPrincipal, Target, url_from_stack

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"


def stack(outputs, status="CREATE_COMPLETE"):
    return {
        "Stacks": [
            {"StackName": "idblocks-dev", "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": status,
             "Outputs": outputs}
        ]
    }  # fmt: skip


@pytest.fixture
def cloudformation():
    client = boto3.client("cloudformation", region_name="eu-west-1")
    with Stubber(client) as stub:
        yield client, stub


def test_the_url_is_the_stacks_api_url_output(cloudformation):
    """Given a stack with outputs, when its URL is read, then it is ApiUrl
    (without a trailing slash), asked of that stack by name."""
    client, stub = cloudformation
    outputs = [
        {"OutputKey": "CountersTableName", "OutputValue": "counters"},
        {"OutputKey": "ApiUrl", "OutputValue": URL + "/"},
    ]
    stub.add_response("describe_stacks", stack(outputs), {"StackName": "idblocks-dev"})
    assert url_from_stack("idblocks-dev", client) == URL
    stub.assert_no_pending_responses()


def test_a_stack_without_api_url_is_a_clear_error(cloudformation):
    client, stub = cloudformation
    stub.add_response("describe_stacks", stack([], status="ROLLBACK_COMPLETE"), {"StackName": "other"})
    with pytest.raises(ValueError, match="other \\(ROLLBACK_COMPLETE\\) has no ApiUrl output"):
        url_from_stack("other", client)


def test_neither_stack_nor_url_is_one_line_of_usage():
    with pytest.raises(SystemExit) as stopped:
        resolve_url(None, None)
    assert stopped.value.code == USAGE
    assert "\n" not in USAGE


def test_an_execute_api_url_is_signed_and_a_local_one_is_not(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    deployed = Target.from_environment(URL)
    headers = deployed.admin_auth.headers("GET", URL + "/admin/counters", None)
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/" in headers["Authorization"]
    local = Target.from_environment("http://127.0.0.1:3000")
    assert local.admin_auth.headers("GET", "http://127.0.0.1:3000/admin/counters", None) == {}


# -- a least-privileged client principal (make test-deployed CLIENT_ROLE=...) -----

ROLE = "arn:aws:iam::123456789012:role/orders-service"
TWO = ["--client-counter", "a", "--other-counter", "b"]


def test_make_passes_every_option_and_empty_ones_count_as_not_given():
    """make passes unset variables as empty strings."""
    empty = [
        "--url",
        "--region",
        "--client-role-arn",
        "--client-profile",
        "--client-counter",
        "--other-counter",
    ]
    args, rest = parse_args(["--stack", "s", *(part for option in empty for part in (option, "")), "-k", "x"])
    assert (args.stack, args.url, args.client_role_arn, args.client_counter) == ("s", None, None, None)
    assert rest == ["-k", "x"]


def test_a_role_comes_with_its_counter_and_one_it_may_not_use():
    argv = ["--client-role-arn", ROLE, "--client-counter", "orders", "--other-counter", "invoices"]
    args, _ = parse_args(["--stack", "s", *argv])
    assert (args.client_role_arn, args.client_counter, args.other_counter) == (ROLE, "orders", "invoices")


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([*TWO, "--client-role-arn", ROLE, "--client-profile", "p"], "not both"),
        (["--client-role-arn", ROLE, "--client-counter", "a"], "needs --client-counter and --other-counter"),
        (["--client-profile", "p"], "needs --client-counter and --other-counter"),
        (TWO, "need --client-role-arn or --client-profile"),
        ([*TWO, "--client-role-arn", "orders-service"], "not a role's ARN"),
        (["--client-role-arn", ROLE, "--client-counter", "a", "--other-counter", "a"], "does not name"),
    ],
)
def test_a_principal_given_by_halves_is_refused_in_one_line(argv, complaint, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--stack", "s", *argv])
    assert stopped.value.code == 2
    assert complaint in capsys.readouterr().err


def test_the_principal_is_read_back_from_the_environment_the_runner_sets():
    assert ClientPrincipal.from_environment({}) is None
    principal = ClientPrincipal.from_environment(
        {
            "IDBLOCKS_E2E_CLIENT_ROLE_ARN": ROLE,
            "IDBLOCKS_E2E_CLIENT_COUNTER": "orders",
            "IDBLOCKS_E2E_OTHER_COUNTER": "invoices",
        }
    )
    assert principal == ClientPrincipal(ROLE, None, "orders", "invoices")


def test_a_role_is_assumed_and_its_credentials_sign_the_requests(monkeypatch):
    """The runner's own credentials assume the role (STS, stubbed here); the
    requests are signed with the role's, not the runner's."""
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDRUNNER", "AWS_SECRET_ACCESS_KEY": "secret"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    sts = boto3.client("sts", region_name="eu-west-1")
    expiry = "2099-01-01T00:00:00Z"
    assumed = {"AccessKeyId": "ASIAROLEEXAMPLE01", "SecretAccessKey": "s", "SessionToken": "t"}
    assumed["Expiration"] = expiry
    with Stubber(sts) as stub:
        stub.add_response(
            "assume_role",
            {"Credentials": assumed, "AssumedRoleUser": {"AssumedRoleId": "AROA:e2e", "Arn": ROLE + "/e2e"}},
            {"RoleArn": ROLE, "RoleSessionName": "idblocks-e2e-client"},
        )
        auth = ClientPrincipal(ROLE, None, "orders", "invoices").auth(sts=sts)
        headers = auth.headers("POST", URL + "/counters/orders/next", None)
        stub.assert_no_pending_responses()
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAROLEEXAMPLE01/")
    assert headers["X-Amz-Security-Token"] == "t"
