"""IAM decisions on the template's policies, made by an IAM policy evaluator
(@cloud-copilot/iam-simulate, pinned in tests/support/iam/package-lock.json
and installed by `make iam-simulator`), never by comparing strings: AWS's
evaluation logic, with its wildcards (``*`` spans ``/``, ``?`` is one
character, ``.`` is a dot), case rules (actions fold case, resources do not),
resource policies, service principals and condition keys.

moto's evaluator (moto.iam.access_control) was not taken: it turns a policy's
resource into a regular expression without escaping it, so a ``.`` in a
counter's name matches any character (a policy for orders.eu allowed
ordersXeu), and ``?`` becomes "optional"."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from localrun.template import ROOT

SIMULATOR = ROOT / "tests" / "support" / "iam"
ALLOWED = "Allowed"
# The principal of a request that is not signed (the evaluator's marker).
ANONYMOUS = {"type": "Anonymous"}


@dataclass(frozen=True)
class Request:
    """``principal`` (an ARN, or ANONYMOUS) calls ``action`` on ``resource``
    (in ``account``), with ``identity_policies`` attached to it and
    ``resource_policy`` on the resource; ``context``: the request's
    condition keys (the evaluator derives none itself)."""

    principal: str | dict[str, str]
    action: str
    resource: str
    account: str
    identity_policies: tuple[dict[str, Any], ...] = ()
    resource_policy: dict[str, Any] | None = None
    context: dict[str, str] = field(default_factory=dict)


def decide(requests: Iterable[Request]) -> list[str]:
    """The evaluator's decision on each request: "Allowed", "ImplicitlyDenied"
    or "ExplicitlyDenied" (or "invalid: ..." if it refuses the request)."""
    requests = list(requests)
    node = shutil.which("node")
    if node is None or not (SIMULATOR / "node_modules" / ".installed").exists():
        pytest.fail("the IAM policy evaluator is not installed: run `make iam-simulator` (needs Node.js 20+)")
    sent = [
        {
            "principal": r.principal,
            "action": r.action,
            "resource": r.resource,
            "account": r.account,
            "identityPolicies": list(r.identity_policies),
            "resourcePolicy": r.resource_policy,
            "context": r.context,
        }
        for r in requests
    ]
    done = subprocess.run(
        [node, "simulate.mjs"],
        input=json.dumps(sent),
        cwd=SIMULATOR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    decisions = json.loads(done.stdout)
    assert len(decisions) == len(requests)
    return decisions


def principal_context(
    principal: str, organization: str | None = None, source_vpce: str | None = None
) -> dict[str, str]:
    """The condition keys AWS gives a request from ``principal`` (an IAM
    role's or user's ARN) of ``organization``, through the VPC endpoint
    ``source_vpce`` (IAM user guide, "AWS global condition context keys")."""
    context = {"aws:PrincipalArn": principal, "aws:PrincipalAccount": principal.split(":")[4]}
    if organization:
        context["aws:PrincipalOrgID"] = organization
    if source_vpce:
        context["aws:SourceVpce"] = source_vpce
    return context
