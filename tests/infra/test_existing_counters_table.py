"""Deploying again onto the counters table a deleted stack left (or one
restored from a backup): with ExistingCountersTable the stack creates no
counters table, and its functions, their policies, the alarm and the
dashboard use the one named; a stack switched onto its own table keeps it,
counters included. Read from the template as CloudFormation deploys it
(tests/support/sam.py), the switch by scripts/parameter_changes.py."""

from __future__ import annotations

import json
import re

import botocore.session

from localrun.template import ROOT, STACK, Template
from scripts.parameter_changes import HELD, change
from tests.infra.test_counters_table_policy import KEPT_TABLE, TABLE_ARN, deployed, function_roles
from tests.infra.test_policies import resolved
from tests.support.iam import ALLOWED, Request, decide
from tests.support.metrics import dashboard_text
from tests.support.sam import created_in, translate

OTHER_TABLE_ARN = TABLE_ARN.replace(KEPT_TABLE, "idblocks-CountersTable-0THER0TABLE0")
FUNCTIONS = ("NextFunction", "BatchFunction", "AdminFunction")


def test_with_an_existing_table_the_stack_creates_none_and_everything_uses_it():
    """Every `sam delete` left a table and every deploy made a new, empty
    one: the counters started over. Named, the table is the one the
    functions write, the alarm and the dashboard watch, the output shows."""
    created = created_in(STACK, ExistingCountersTable=KEPT_TABLE)
    assert [k for k, r in created.items() if r["Type"] == "AWS::DynamoDB::Table"] == ["IdempotencyTable"]
    cfn = translate(ExistingCountersTable=KEPT_TABLE)
    for function in FUNCTIONS:
        assert (
            cfn["Resources"][function]["Properties"]["Environment"]["Variables"]["COUNTERS_TABLE"]
            == KEPT_TABLE
        )
    alarm = cfn["Resources"]["CountersThrottleAlarm"]["Properties"]
    assert alarm["Dimensions"] == [{"Name": "TableName", "Value": KEPT_TABLE}]
    dashboard = json.loads(dashboard_text(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    watched = [
        line[:4]
        for widget in dashboard["widgets"]
        for line in widget["properties"].get("metrics", [])
        if line[0] == "AWS/DynamoDB" and line[1] == "WriteThrottleEvents"
    ]
    assert ["AWS/DynamoDB", "WriteThrottleEvents", "TableName", KEPT_TABLE] in watched
    assert cfn["Outputs"]["CountersTableName"]["Value"] == KEPT_TABLE


def test_the_functions_may_write_the_named_table_and_no_other():
    """Each function's role allows on the named table what it allowed on the
    table the stack created, and nothing on another table."""
    roles = function_roles(deployed(ExistingCountersTable=KEPT_TABLE))
    actions = ("dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:PutItem")
    cases = [(f, a, arn) for f in FUNCTIONS for a in actions for arn in (TABLE_ARN, OTHER_TABLE_ARN)]
    found = decide(
        Request(roles[f][0], a, arn, STACK.account_id, identity_policies=roles[f][1]) for f, a, arn in cases
    )
    allowed = {(f, a, arn) for (f, a, arn), decision in zip(cases, found, strict=True) if decision == ALLOWED}
    assert allowed == {
        ("NextFunction", "dynamodb:UpdateItem", TABLE_ARN),
        ("BatchFunction", "dynamodb:UpdateItem", TABLE_ARN),
        ("AdminFunction", "dynamodb:UpdateItem", TABLE_ARN),
        ("AdminFunction", "dynamodb:GetItem", TABLE_ARN),
        ("AdminFunction", "dynamodb:Scan", TABLE_ARN),
    }


def test_the_parameter_takes_the_names_dynamodb_takes():
    """Its AllowedPattern is DynamoDB's table name (botocore's TableName:
    3 to 255 characters of letters, digits, _ . -), or empty."""
    pattern = Template().raw["Parameters"]["ExistingCountersTable"]["AllowedPattern"]
    name = botocore.session.get_session().get_service_model("dynamodb").shape_for("TableName").metadata
    probes = ["", "ab", "abc", "a" * 255, "a" * 256, "a.b-c_9", KEPT_TABLE, "a b", "a/b", "tbl:x", "ÅBC"]
    probes.append(TABLE_ARN)  # an ARN is not a name
    for probe in probes:
        takes = bool(re.fullmatch(pattern, probe))
        dynamodb_takes = probe == "" or (
            name["min"] <= len(probe) <= name["max"] and bool(re.fullmatch(name["pattern"], probe))
        )
        assert takes == dynamodb_takes, probe


def test_a_stack_switched_onto_its_own_table_keeps_it_and_goes_on_with_its_counters():
    """The update removes CountersTable from the stack; CloudFormation then
    applies the DeletionPolicy the stack had, Retain: the table stays, and
    the functions, republished behind their alias, name the same table."""
    kept = translate()["Resources"]["CountersTable"]
    assert (kept["DeletionPolicy"], kept["UpdateReplacePolicy"]) == ("Retain", "Retain")
    switched = change("ExistingCountersTable", "", KEPT_TABLE)
    assert switched.deleted == switched.retained == ("CountersTable",)
    types = dict(switched.types)
    assert not [k for k in switched.replaced if types[k] in HELD], switched.replaced
    assert {f"{f}Version" for f in FUNCTIONS} <= set(switched.replaced)
    # The stack's own table, as CloudFormation named it, is the one named now.
    before, after = deployed(), deployed(ExistingCountersTable=KEPT_TABLE)
    for function in FUNCTIONS:
        variables = [
            resolved(d["cfn"]["Resources"][function]["Properties"]["Environment"]["Variables"], d["names"])
            for d in (before, after)
        ]
        assert variables[0] == variables[1], function
    assert function_roles(before) == function_roles(after)


def test_switching_back_creates_a_new_empty_table_as_the_deploy_page_warns():
    back = change("ExistingCountersTable", KEPT_TABLE, "")
    assert back.created == ("CountersTable",)
    page = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    section = page.split("### Deploying again", 1)[1].split("###", 1)[0]
    assert "new, empty counters table" in section
    described = " ".join(Template().raw["Parameters"]["ExistingCountersTable"]["Description"].split())
    assert "never set it back to empty: that creates a new, empty counters table" in described
