"""How make test-deployed finds the URL to test: the stack's ApiUrl output,
read through a stubbed CloudFormation (no AWS account is needed)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from tests.e2e.deployed import USAGE, resolve_url
from tests.e2e.target import Target, url_from_stack

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
