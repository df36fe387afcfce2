"""Only the stack's functions may write a counter: the counters table's
resource policy, evaluated as IAM evaluates a request (the resource policy
with the caller's identity policies: tests/support/iam.py) for an account
administrator, each function's role as the SAM transform makes it, and an
operator holding only the AdminPolicyArn policy; and the same document in
the CountersTablePolicy output, with the command that applies it, for a
table the stack does not create.

A stack here is idblocks in us-east-1 of account 123456789012
(localrun.template.STACK)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jmespath
import pytest

from localrun.template import STACK
from tests.infra.test_policies import managed_policy, resolved, stack
from tests.support.iam import ALLOWED, SIMULATOR, Request, decide

ACCOUNT, REGION = STACK.account_id, STACK.region
# The table a deleted stack of the same name left (its name as CloudFormation gave it).
KEPT_TABLE = "idblocks-CountersTable-1A2B3C4D5E6F"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{KEPT_TABLE}"
REPAIR_ROLE = f"arn:aws:iam::{ACCOUNT}:role/id-repair"
FUNCTIONS = ("NextFunction", "BatchFunction", "AdminFunction")

# AWS's managed policy AdministratorAccess, as IAM shows it.
ADMINISTRATOR_ACCESS = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}

# What writes an item of the table, by the service authorization reference's
# actions: the table's own writes; TransactWriteItems, which IAM authorizes as
# the PutItem, UpdateItem and DeleteItem it holds; PartiQL (ExecuteStatement,
# BatchExecuteStatement, ExecuteTransaction), which it authorizes as each
# statement's PartiQL action; a global table's replication into this table;
# and TTL, whose deletions turning it on lets loose.
ITEM_WRITES = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
    "dynamodb:PartiQLDelete",
    "dynamodb:WriteDataForReplication",
    "dynamodb:UpdateTimeToLive",
)
READS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:ConditionCheckItem",
    "dynamodb:PartiQLSelect",
    "dynamodb:DescribeTable",
)
# The reference's other write-level actions on a table, and why none writes its items.
NOT_ITEM_WRITES = {
    "AssociateTableReplica": "makes a replica elsewhere; what it replicates back is WriteDataForReplication",
    "CreateBackup": "copies the table, writes none of it",
    "CreateGlobalTable": "replicas as AssociateTableReplica",
    "CreateGlobalTableWitness": "a witness holds no items of this table",
    "CreateTable": "a new table",
    "CreateTableReplica": "as AssociateTableReplica",
    "DeleteGlobalTableWitness": "as CreateGlobalTableWitness",
    "DeleteResourcePolicy": "the policy itself: what an administrator keeps (docs/security.md)",
    "DeleteTable": "the whole table: deletion protection and DeletionPolicy Retain stand in its way",
    "DeleteTableReplica": "another region's replica",
    "DisableKinesisStreamingDestination": "reads the table's changes",
    "EnableKinesisStreamingDestination": "reads the table's changes",
    "ExportTableToPointInTime": "reads the table into S3",
    "ImportTable": "a new table from S3",
    "PutResourcePolicy": "the policy itself, as DeleteResourcePolicy; and how an update changes it",
    "ReplicateSettings": "settings, not items",
    "RestoreTableFromAwsBackup": "a new table",
    "RestoreTableFromBackup": "a new table",
    "RestoreTableToPointInTime": "a new table",
    "StartAwsBackupJob": "copies the table, writes none of it",
    "TagResource": "tags, not items",
    "UntagResource": "tags, not items",
    "UpdateContinuousBackups": "point-in-time recovery, not items",
    "UpdateContributorInsights": "metrics, not items",
    "UpdateGlobalTable": "replicas as AssociateTableReplica",
    "UpdateGlobalTableSettings": "settings, not items",
    "UpdateGlobalTableVersion": "replicas as AssociateTableReplica",
    "UpdateKinesisStreamingDestination": "reads the table's changes",
    "UpdateTable": "capacity, streams, indexes: no item; CloudFormation updates the table with it",
    "UpdateTableReplicaAutoScaling": "capacity, not items",
}


def _with_attributes(value: Any) -> Any:
    """Each Fn::GetAtt [Resource, Attribute] written as a Ref to
    "Resource.Attribute", for test_policies.resolved, which reads Refs."""
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        return {"Ref": ".".join(value["Fn::GetAtt"])}
    if isinstance(value, dict):
        return {key: _with_attributes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_attributes(item) for item in value]
    return value


def deployed(**parameters: str) -> dict[str, Any]:
    """test_policies.stack's, with the tables and their ARNs as deployed."""
    found = stack(**parameters)
    found["names"] |= {
        "CountersTable": KEPT_TABLE,
        "CountersTable.Arn": TABLE_ARN,
        "IdempotencyTable": "idblocks-IdempotencyTable-1A2B3C",
        "IdempotencyTable.Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/idblocks-IdempotencyTable-1A2B3C",
    }
    return found


def table_policy(**parameters: str) -> dict[str, Any]:
    deployment = deployed(**parameters)
    table = deployment["cfn"]["Resources"]["CountersTable"]["Properties"]
    return resolved(_with_attributes(table["ResourcePolicy"]["PolicyDocument"]), deployment["names"])


def function_roles(deployment: dict[str, Any]) -> dict[str, tuple[str, tuple[dict[str, Any], ...]]]:
    """Each function -> its role's ARN as IAM names it (the path SAM gives
    it, and a name as CloudFormation makes one), and its inline policies:
    the managed ones it also holds grant nothing on DynamoDB
    (tests/infra/test_template.py names them)."""
    roles = {}
    for function in FUNCTIONS:
        role = deployment["cfn"]["Resources"][f"{function}Role"]["Properties"]
        path = resolved(role.get("Path", "/"), deployment["names"])  # IAM's default path: "/"
        arn = f"arn:aws:iam::{ACCOUNT}:role{path}{STACK.name}-{function}Role-AbCdEf123456"
        policies = tuple(
            resolved(_with_attributes(policy["PolicyDocument"]), deployment["names"])
            for policy in role["Policies"]
        )
        roles[function] = (arn, policies)
    return roles


def request(role_arn: str, action: str, policies: tuple[dict[str, Any], ...], table: dict | None) -> Request:
    """``action`` on the table by a session of the role ``role_arn``: IAM
    puts the role's ARN, its path included, in the request as
    aws:PrincipalArn, whoever assumed it (IAM user guide, "AWS global
    condition context keys")."""
    name = role_arn.rsplit("/", 1)[1]
    return Request(
        principal=f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/session",
        action=action,
        resource=TABLE_ARN,
        account=ACCOUNT,
        identity_policies=policies,
        resource_policy=table,
        context={"aws:PrincipalArn": role_arn},
    )


def decisions(callers: dict[str, tuple[str, tuple]], table: dict[str, Any]) -> dict[tuple, tuple[str, str]]:
    """(caller, action) -> (the decision with the table's policy, without it)."""
    cases = [(caller, action) for caller in callers for action in (*ITEM_WRITES, *READS)]
    found = decide(
        request(callers[caller][0], action, callers[caller][1], policy)
        for policy in (table, None)
        for caller, action in cases
    )
    return dict(zip(cases, zip(found[: len(cases)], found[len(cases) :], strict=True), strict=True))


def test_only_the_stacks_functions_may_write_a_counter_an_administrator_included():
    """A role with AdministratorAccess (the console's administrator, a
    script run with it), a role of another stack's functions with it too, and
    an operator with only the AdminPolicyArn policy may read as before and
    write no item; each function keeps exactly what its role allows. Without
    the policy, the administrator could lower or delete any counter."""
    deployment = deployed()
    callers = {
        "administrator": (f"arn:aws:iam::{ACCOUNT}:role/Administrator", (ADMINISTRATOR_ACCESS,)),
        "another stack's function": (
            f"arn:aws:iam::{ACCOUNT}:role/idblocks/{REGION}/idblocks-scratch/idblocks-scratch-NextFunctionRole-1",
            (ADMINISTRATOR_ACCESS,),
        ),
        "operator": (
            f"arn:aws:iam::{ACCOUNT}:role/id-operators",
            (managed_policy(deployment, "AdminPolicy"),),
        ),
        **function_roles(deployment),
    }
    found = decisions(callers, table_policy())
    for (caller, action), (with_policy, without) in found.items():
        if action in READS or caller in FUNCTIONS:
            assert with_policy == without, (caller, action, with_policy, without)
        else:
            assert with_policy == "ExplicitlyDenied", (caller, action, with_policy)
    # What the functions keep, and what the administrator lost.
    allowed = {(caller, action) for (caller, action), (decision, _) in found.items() if decision == ALLOWED}
    assert {(c, a) for c, a in allowed if a in ITEM_WRITES} == {(f, "dynamodb:UpdateItem") for f in FUNCTIONS}
    assert {a for c, a in allowed if c == "administrator"} == set(READS)
    assert found["administrator", "dynamodb:PutItem"][1] == ALLOWED


def test_a_repair_role_may_write_counters_while_the_parameter_names_it():
    """CounterRepairRoleArn lets one more role write, for a repair by hand,
    and only while an update keeps it named."""
    callers = {
        "repair": (REPAIR_ROLE, (ADMINISTRATOR_ACCESS,)),
        "administrator": (f"arn:aws:iam::{ACCOUNT}:role/Administrator", (ADMINISTRATOR_ACCESS,)),
    }
    during = decisions(callers, table_policy(CounterRepairRoleArn=REPAIR_ROLE))
    after = decisions(callers, table_policy())
    for action in ITEM_WRITES:
        assert during["repair", action][0] == ALLOWED, action
        assert during["administrator", action][0] == after["repair", action][0] == "ExplicitlyDenied", action


def test_the_policy_denies_every_item_write_the_service_authorization_reference_has():
    """Every write-level DynamoDB action on a table in the reference the
    evaluator ships (tests/support/iam/package-lock.json pins it) is one the
    policy denies or one NOT_ITEM_WRITES says writes no item: an action added
    to the reference fails here until it is read and placed."""
    reference = (
        SIMULATOR / "node_modules" / "@cloud-copilot" / "iam-data" / "data" / "actions" / "dynamodb.json"
    )
    if not reference.exists():
        pytest.fail("the IAM policy evaluator is not installed: run `make iam-simulator` (needs Node.js 20+)")
    writes = {
        f"dynamodb:{action['name']}"
        for action in json.loads(reference.read_text()).values()
        if "Write" in action["accessLevel"] and any(r["name"] == "table" for r in action["resourceTypes"])
    }
    assert writes == set(ITEM_WRITES) | {f"dynamodb:{name}" for name in NOT_ITEM_WRITES}
    [statement] = table_policy()["Statement"]
    assert sorted(statement["Action"]) == sorted(ITEM_WRITES)


def test_the_policy_is_within_what_dynamodb_takes():
    """DynamoDB takes a resource policy of at most 20 KB, whitespace counted
    ("Resource-based policy considerations"): the document, for the longest
    stack name (128 characters) and repair role ARN the parameter takes. It
    denies only: a statement that allowed "*" would be public access, which
    DynamoDB's block refuses."""
    from localrun.template import Stack, Template

    longest = Stack(name="i" * 128, region="ap-southeast-5")
    repair = f"arn:aws-us-gov:iam::{ACCOUNT}:role/" + "r" * 512
    cfn = Template(parameter_overrides={"CounterRepairRoleArn": repair}, stack=longest).transformed
    document = cfn["Resources"]["CountersTable"]["Properties"]["ResourcePolicy"]["PolicyDocument"]
    assert len(json.dumps(document).encode()) <= 20 * 1024
    assert {statement["Effect"] for statement in document["Statement"]} == {"Deny"}


# -- a table the stack does not create -------------------------------------------------------


def outputs(**parameters: str) -> dict[str, str]:
    """The stack's outputs as CloudFormation shows them once deployed: those
    its conditions keep, each resource named as CloudFormation would."""
    from localrun.template import Template

    deployment = deployed(**parameters)
    resources = deployment["cfn"]["Resources"]
    names = {logical_id: f"{STACK.name}-{logical_id}-1A2B3C" for logical_id in resources} | deployment[
        "names"
    ]
    kept = Template(parameter_overrides=parameters).kept(deployment["cfn"]["Outputs"])
    return {name: resolved(output["Value"], names) for name, output in kept.items()}


@pytest.mark.parametrize("repair_role", ["", REPAIR_ROLE])
def test_a_stack_on_an_existing_table_outputs_the_policy_a_created_table_gets(repair_role):
    shown = outputs(ExistingCountersTable=KEPT_TABLE, CounterRepairRoleArn=repair_role)
    assert json.loads(shown["CountersTablePolicy"]) == table_policy(CounterRepairRoleArn=repair_role)
    assert "CountersTablePolicy" not in outputs(CounterRepairRoleArn=repair_role)


def test_the_output_command_applies_that_policy_to_that_table(tmp_path: Path):
    """The CountersTablePolicyCommand output, run by bash with an `aws` that
    answers describe-stacks with the stack's outputs as the AWS CLI prints
    them (the command's --query applied, --output text) and records what it
    is asked: put-resource-policy gets the table's ARN and the policy, whole."""
    shown = outputs(ExistingCountersTable=KEPT_TABLE)
    calls = tmp_path / "calls"
    described = {"Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in shown.items()]}]}
    fake = tmp_path / "aws"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "import jmespath\n"
        "args = sys.argv[1:]\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(args) + '\\n')\n"
        "if args[:2] == ['cloudformation', 'describe-stacks']:\n"
        "    query = args[args.index('--query') + 1]\n"
        f"    print('\\t'.join(jmespath.search(query, {described!r})))\n"
    )
    fake.chmod(0o755)
    environment = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", shown["CountersTablePolicyCommand"]], env=environment, timeout=30)
    assert done.returncode == 0
    describe, put = [json.loads(line) for line in calls.read_text().splitlines()]
    assert describe[:2] == ["cloudformation", "describe-stacks"]
    assert describe[describe.index("--stack-name") + 1] == STACK.name
    assert describe[describe.index("--output") + 1] == "text"
    assert put == [
        "dynamodb",
        "put-resource-policy",
        "--region",
        REGION,
        "--resource-arn",
        TABLE_ARN,
        "--policy",
        shown["CountersTablePolicy"],
    ]
    assert shlex.split(shown["CountersTablePolicyCommand"])[:3] == ["aws", "dynamodb", "put-resource-policy"]
    assert jmespath.search("Stacks[0].Outputs[0]", described)  # the fake's answer has outputs to select from
