"""The files that run the functions outside AWS agree with template.yaml."""

from __future__ import annotations

import json

import boto3
import pytest

from localrun.tables import TABLE_NAMES
from localrun.template import ROOT
from tests.support.sam import translate


def test_sam_local_env_vars_override_only_variables_the_template_declares(template):
    # `sam local start-api --env-vars` ignores names the template does not
    # declare; its "Parameters" are for every function
    env = json.loads((ROOT / "devserver" / "env.json").read_text())
    functions = template.of_type("AWS::Serverless::Function")
    declared = set.intersection(*(set(template.environment(name, TABLE_NAMES)) for name in functions))
    assert set(env["Parameters"]) <= declared
    assert env["Parameters"]["COUNTERS_TABLE"] == TABLE_NAMES["CountersTable"]
    assert env["Parameters"]["IDEMPOTENCY_TABLE"] == TABLE_NAMES["IdempotencyTable"]
    assert env["Parameters"]["AWS_ENDPOINT_URL_DYNAMODB"].startswith("http://")


def test_the_endpoint_variable_is_empty_in_aws_and_botocore_then_ignores_it(template, monkeypatch):
    """No parameter sets it (DynamoDbEndpoint took any host, to which the
    functions would have sent their signed DynamoDB traffic): only a local
    run's environment (`sam local --env-vars`, the dev server) points it elsewhere."""
    assert "DynamoDbEndpoint" not in template.raw["Parameters"]
    assert template.raw["Globals"]["Function"]["Environment"]["Variables"]["AWS_ENDPOINT_URL_DYNAMODB"] == ""
    assert all("DynamoDbEndpoint" not in str(r) for r in translate()["Resources"].values())
    assert (
        template.environment("NextFunction", {"CountersTable": "c", "IdempotencyTable": "i"})[
            "AWS_ENDPOINT_URL_DYNAMODB"
        ]
        == ""
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
    client = boto3.session.Session().client("dynamodb", region_name="eu-west-1")
    assert client.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
    client = boto3.session.Session().client("dynamodb", region_name="eu-west-1")
    assert client.meta.endpoint_url == "http://127.0.0.1:8000"


def test_the_dev_server_refuses_a_deployed_stacks_counters_table(capsys):
    """With ExistingCountersTable the functions name a table in AWS, which
    the dev server does not have: every request failed with a 500 instead of
    the start with a clear error."""
    from devserver.__main__ import parse_args, read_template

    args = parse_args(["--parameter", "ExistingCountersTable=idblocks-CountersTable-1A2B3C4D5E6F"])
    with pytest.raises(SystemExit) as stopped:
        read_template(args)
    assert stopped.value.code == 2
    assert "ExistingCountersTable names a deployed stack's counters table" in capsys.readouterr().err
    assert (
        read_template(parse_args(["--parameter", "ExistingCountersTable="])).parameters[
            "ExistingCountersTable"
        ]
        == ""
    )
