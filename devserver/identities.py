"""Who may call what on the dev server: identities, each an access key with
an IAM policy, and the ARN API Gateway gives each request in IAM.

``--identity ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY``: ROLE ``client`` is the
stack's ClientPolicy, ``admin`` its AdminPolicy, both read from template.yaml
with the parameters the dev server runs with (ClientCounters, StageName,
AllowGetNext), so they cannot drift from what is deployed; any other ROLE is
the path of a policy document (JSON). A request signed with the key is
evaluated (devserver.policy) for ``execute-api:Invoke`` on
``arn:aws:execute-api:<region>:<account>:<api-id>/<stage>/<METHOD>/<path>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from devserver.policy import INVOKE, Policy, PolicyError, invoke_statements, parse, read
from devserver.sigv4 import Key
from localrun.names import did_you_mean
from localrun.template import Stack, Template, resolve

# The stack's policy each role stands for.
STACK_POLICIES = {"client": "ClientPolicy", "admin": "AdminPolicy"}
# SAM CLI's API id in the events it builds (requestContext.apiId).
LOCAL_API_ID = "1234567890"
# ROLE=ACCESS_KEY_ID:SECRET: an access key id is letters and digits, so the
# first "=" followed by one and a ":" ends the role (a path may hold "=").
_SPEC = re.compile(r"(?P<role>.+?)=(?P<access_key>[A-Za-z0-9]{1,128}):(?P<secret_key>.+)")


@dataclass(frozen=True)
class IdentitySpec:
    """``--identity`` as given: the role (client, admin, a policy's path) and the key."""

    role: str
    access_key: str
    secret_key: str

    @classmethod
    def parse(cls, text: str) -> IdentitySpec:
        match = _SPEC.fullmatch(text)
        if match is None:
            raise ValueError(
                f"expected ROLE=ACCESS_KEY_ID:SECRET_ACCESS_KEY (ROLE: client, admin or a policy's "
                f"path), not {text!r}"
            )
        return cls(**match.groupdict())


@dataclass(frozen=True)
class ApiArn:
    """How API Gateway names a request to this API in IAM."""

    region: str
    account: str
    api_id: str
    stage: str

    @cached_property
    def partition(self) -> str:
        """The region's, as the stack's policies name it (AWS::Partition)."""
        return Stack(region=self.region).values["AWS::Partition"]

    @cached_property
    def prefix(self) -> str:
        return f"arn:{self.partition}:execute-api:{self.region}:{self.account}:{self.api_id}/{self.stage}/"

    def of(self, method: str, path: str) -> str:
        """The ARN of ``method`` on ``path`` (as sent, with its leading /)."""
        return f"{self.prefix}{method}/{path.removeprefix('/')}"

    def shown(self, resource: str) -> str:
        """``resource`` (a policy's) as the banner shows it: METHOD /path
        when it names this API and stage, else as written."""
        if resource == "*":
            return "every route"
        if not resource.startswith(self.prefix):
            return resource
        method, _, path = resource.removeprefix(self.prefix).partition("/")
        return f"{method} /{path}"


@dataclass(frozen=True)
class Identity:
    """An access key and the policy a request signed with it is evaluated against."""

    name: str
    key: Key
    policy: Policy

    def calls(self, arn: ApiArn) -> str:
        """What it may call, in its policy's own terms, for the banner."""
        said = []
        for statement in invoke_statements(self.policy):
            resources = ", ".join(arn.shown(r) for r in statement.resources)
            if statement.effect == "Allow":
                said.append(f"all but {resources}" if statement.not_resource else resources)
            else:
                said.append(f"never {resources}" if not statement.not_resource else f"only {resources}")
        return "; ".join(said) or f"nothing (no statement on {INVOKE})"


def api_arn(template: Template, region: str, account: str, api_id: str = LOCAL_API_ID) -> ApiArn:
    return ApiArn(region, account, api_id, template.parameters["StageName"])


def identities_of(specs: list[IdentitySpec], template: Template, arn: ApiArn) -> dict[str, Identity]:
    """Each ``--identity`` by its access key; PolicyError saying what is wrong."""
    found: dict[str, Identity] = {}
    for spec in specs:
        if spec.access_key in found:
            raise PolicyError(
                f"access key {spec.access_key} is given to two identities ({found[spec.access_key].name} "
                f"and {spec.role}): give each its own"
            )
        if spec.role in STACK_POLICIES:
            policy = stack_policy(template, STACK_POLICIES[spec.role], arn)
        else:
            policy = policy_file(spec.role)
        found[spec.access_key] = Identity(spec.role, Key(spec.access_key, spec.secret_key), policy)
    return found


def policy_file(role: str) -> Policy:
    """The policy document at the path ``role`` names. A role that is no
    file and looks like one of the stack's (clinet) is named with it,
    rather than as a file that cannot be read."""
    path = Path(role)
    meant = "" if path.exists() else did_you_mean(role, STACK_POLICIES)
    if meant:
        raise PolicyError(
            f"--identity {role}=...: {role} is neither a role ({', '.join(STACK_POLICIES)}) "
            f"nor a policy file{meant}"
        )
    return read(path)


# -- the stack's policies, from template.yaml ----------------------------------


def stack_policy(template: Template, logical_id: str, arn: ApiArn) -> Policy:
    """The PolicyDocument of the template's ``logical_id`` (an
    AWS::IAM::ManagedPolicy) as CloudFormation would create it for this
    API: the template read as every other reader of it reads it
    (localrun.template.resolve), in a stack of the API's region and account,
    with the parameters the dev server runs with, and the API's id as
    CloudFormation gives ``${Api}`` (a RestApi's Ref). Any other intrinsic
    function left is refused by the policy's parser."""
    # The id is passed as a value the resolver knows, as it knows the parameters'.
    resolution = resolve(
        template.raw,
        template.parameters | {"Api": arn.api_id},
        Stack(region=arn.region, account_id=arn.account),
    )
    resource = resolution.template["Resources"].get(logical_id)
    if resource is None:
        raise PolicyError(f"template.yaml has no {logical_id}")
    condition = resource.get("Condition")
    if condition and not resolution.conditions[condition]:
        auth = template.parameters.get("ClientAuth")
        raise PolicyError(
            f"template.yaml creates {logical_id} only when its condition {condition} holds, and it does "
            f"not with these parameters (ClientAuth {auth}): a deployed stack has no such policy to "
            "attach. Give this identity a policy document of its own (--identity PATH=...)"
        )
    return parse(resource["Properties"]["PolicyDocument"], f"{logical_id} of template.yaml")
