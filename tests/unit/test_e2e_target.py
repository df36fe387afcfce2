"""How make test-deployed finds what to test and how to sign: the stack's
ApiUrl output and parameters, read through a stubbed CloudFormation (no AWS
account is needed), or a URL and a region; and that a deployed stack is
signed for its region whatever its URL's host name (a custom domain's names
no region), while a server of ours is not signed."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from tests.e2e.deployed import USAGE, Deployment, environment, parse_args, resolve
from tests.e2e.target import ClientPrincipal, Target, read_stack

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"
DOMAIN_URL = "https://ids.example.com/v1"


def stack(outputs, status="CREATE_COMPLETE", parameters=()):
    return {
        "Stacks": [
            {"StackName": "idblocks-dev", "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": status,
             "Outputs": outputs,
             "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters]}
        ]
    }  # fmt: skip


@pytest.fixture
def cloudformation():
    client = boto3.client("cloudformation", region_name="eu-west-1")
    with Stubber(client) as stub:
        yield client, stub


@pytest.fixture
def credentials(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)


def test_the_url_is_the_stacks_api_url_output(cloudformation):
    """Given a stack with outputs, when its URL is read, then it is ApiUrl
    (without a trailing slash), asked of that stack by name."""
    client, stub = cloudformation
    outputs = [
        {"OutputKey": "CountersTableName", "OutputValue": "counters"},
        {"OutputKey": "ApiUrl", "OutputValue": URL + "/"},
    ]
    stub.add_response("describe_stacks", stack(outputs), {"StackName": "idblocks-dev"})
    assert read_stack("idblocks-dev", client).url == URL
    stub.assert_no_pending_responses()


def test_a_stack_without_api_url_is_a_clear_error(cloudformation):
    client, stub = cloudformation
    stub.add_response("describe_stacks", stack([], status="ROLLBACK_COMPLETE"), {"StackName": "other"})
    with pytest.raises(ValueError, match="other \\(ROLLBACK_COMPLETE\\) has no ApiUrl output"):
        read_stack("other", client)


def test_neither_stack_nor_url_is_one_line_of_usage():
    with pytest.raises(SystemExit) as stopped:
        resolve(None, None)
    assert stopped.value.code == USAGE
    assert "\n" not in USAGE


def test_a_stack_with_a_custom_domain_is_signed_for_the_region_it_was_read_in(cloudformation, credentials):
    """Given a stack whose ApiUrl is its custom domain's (no execute-api, no
    region in it), when make test-deployed runs with STACK, then the suite's
    requests are signed, for the region CloudFormation was asked in."""
    client, stub = cloudformation
    outputs = [{"OutputKey": "ApiUrl", "OutputValue": DOMAIN_URL}]
    stub.add_response("describe_stacks", stack(outputs, parameters=[("ClientCounters", "*")]))
    deployment = resolve("idblocks-dev", None, cloudformation=client, configured=lambda: None)
    assert deployment == Deployment(DOMAIN_URL, "eu-west-1", "*")
    args, _ = parse_args(["--stack", "idblocks-dev"])
    target = Target.from_environment(DOMAIN_URL, environment(args, deployment))
    headers = target.admin_auth.headers("GET", DOMAIN_URL + "/admin/counters", None)
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]
    assert target.region == "eu-west-1"


def test_a_region_given_is_the_one_signed_for(cloudformation, credentials):
    client, stub = cloudformation
    stub.add_response("describe_stacks", stack([{"OutputKey": "ApiUrl", "OutputValue": DOMAIN_URL}]))
    assert resolve("idblocks-dev", None, "us-east-2", cloudformation=client).region == "us-east-2"
    deployment = resolve(None, DOMAIN_URL, "ap-south-1")
    args, _ = parse_args(["--url", DOMAIN_URL, "--region", "ap-south-1"])
    target = Target.from_environment(DOMAIN_URL, environment(args, deployment))
    headers = target.client_auth.headers("POST", DOMAIN_URL + "/counters/orders/next", None)
    assert "/ap-south-1/execute-api/" in headers["Authorization"]


def test_a_url_alone_takes_its_region_from_execute_api_or_the_configuration():
    assert resolve(None, URL + "/", configured=lambda: "us-west-2") == Deployment(URL, "eu-west-1")
    assert resolve(None, DOMAIN_URL, configured=lambda: "us-west-2").region == "us-west-2"


def test_a_custom_domain_url_without_a_region_is_one_line_asking_for_region():
    with pytest.raises(SystemExit) as stopped:
        resolve(None, DOMAIN_URL, configured=lambda: None)
    assert str(stopped.value.code).startswith(
        "REGION=<the stack's region> is needed: https://ids.example.com"
    )
    assert "\n" not in str(stopped.value.code)


def test_a_url_given_to_the_suite_is_signed_only_when_said_to_be_deployed(credentials):
    """Signing follows what the URL is said to be, never its host name: a
    dev server anywhere is not signed; a deployed stack is, whatever its
    URL, and an execute-api URL still names its region."""
    for url in (DOMAIN_URL, URL, "http://127.0.0.1:3000"):
        local = Target.from_environment(url, {})
        assert local.admin_auth.headers("GET", url + "/admin/counters", None) == {}, url
    deployed = Target.from_environment(URL, {"IDBLOCKS_E2E_DEPLOYED": "1"})
    headers = deployed.admin_auth.headers("GET", URL + "/admin/counters", None)
    assert "/eu-west-1/execute-api/" in headers["Authorization"]


def test_the_stacks_client_counters_are_passed_on_or_taken_from_an_option(cloudformation):
    client, stub = cloudformation
    outputs = [{"OutputKey": "ApiUrl", "OutputValue": URL}]
    stub.add_response("describe_stacks", stack(outputs, parameters=[("ClientCounters", "team-a-*")]))
    deployment = resolve("idblocks-dev", None, cloudformation=client)
    args, _ = parse_args(["--stack", "idblocks-dev"])
    assert environment(args, deployment)["IDBLOCKS_E2E_CLIENT_COUNTERS"] == "team-a-*"
    args, _ = parse_args(["--url", URL, "--client-counters", "orders"])
    deployment = resolve(args.stack, args.url, args.region, args.client_counters)
    assert environment(args, deployment)["IDBLOCKS_E2E_CLIENT_COUNTERS"] == "orders"


@pytest.mark.parametrize(
    ("client_counters", "other", "granted"),
    [
        ("*", "invoices", True),
        ("orders", "invoices", False),
        ("invoices", "invoices", True),
        ("team-a-*", "team-a-invoices", True),
        ("team-a-*", "team-b-invoices", False),
        (None, "invoices", False),
    ],
)
def test_another_counter_is_known_granted_when_client_counters_names_it(client_counters, other, granted):
    """The least-privilege run skips "another counter is refused" exactly
    when the stack's ClientCounters grants that counter (`*` grants all)."""
    principal = ClientPrincipal(None, "p", "orders", other)
    assert principal.may_take_from_other_counter(client_counters) is granted


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
        "--client-counters",
    ]
    args, rest = parse_args(["--stack", "s", *(part for option in empty for part in (option, "")), "-k", "x"])
    assert (args.stack, args.url, args.client_role_arn, args.client_counter) == ("s", None, None, None)
    assert (args.region, args.client_counters) == (None, None)
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
        auth = ClientPrincipal(ROLE, None, "orders", "invoices").auth(sts=sts, region="eu-west-1")
        headers = auth.headers("POST", DOMAIN_URL + "/counters/orders/next", None)
        stub.assert_no_pending_responses()
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAROLEEXAMPLE01/")
    assert "/eu-west-1/execute-api/" in headers["Authorization"]  # the stack's, not the host's
    assert headers["X-Amz-Security-Token"] == "t"


# -- a caller of another account (make test-deployed OTHER_ACCOUNT_ROLE=...) -----------

OTHER_ROLE = "arn:aws:iam::210987654321:role/orders-service"


def test_a_caller_of_another_account_reaches_the_suite_with_its_counter(credentials):
    """Given a role of another account and its counter, when make
    test-deployed runs, then the suite reads them back as a principal that
    takes IDs of that counter."""
    argv = ["--url", URL, "--other-account-role-arn", OTHER_ROLE, "--other-account-counter", "orders"]
    args, _ = parse_args(argv)
    environ = environment(args, resolve(None, URL))
    assert ClientPrincipal.of_another_account(environ) == ClientPrincipal(OTHER_ROLE, None, "orders", "")
    assert ClientPrincipal.of_another_account({}) is None


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--other-account-role-arn", OTHER_ROLE], "needs --other-account-counter"),
        (["--other-account-counter", "orders"], "needs --other-account-counter"),
        (["--other-account-role-arn", "orders-service", "--other-account-counter", "o"], "not a role's ARN"),
        (
            [
                "--other-account-role-arn",
                OTHER_ROLE,
                "--other-account-profile",
                "p",
                "--other-account-counter",
                "o",
            ],
            "not both",
        ),
    ],
)
def test_a_caller_of_another_account_given_by_halves_is_refused_in_one_line(argv, complaint, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--stack", "s", *argv])
    assert stopped.value.code == 2
    assert complaint in capsys.readouterr().err


def test_a_private_apis_url_through_an_endpoint_names_its_region():
    private = "https://a1b2c3d4e5-vpce-0123456789abcdef0.execute-api.ap-south-1.amazonaws.com/v1"
    assert resolve(None, private, configured=lambda: None).region == "ap-south-1"
