"""IAM policy evaluation for the dev server: whether an identity's policy
allows ``execute-api:Invoke`` on a request's ARN, decided as IAM decides it
for an identity-based policy.

Why not a library: none on PyPI both evaluates IAM policies correctly and is
fit to run in the dev server. moto's evaluator turns a resource into a
regular expression unescaped (a policy for ``orders.eu`` allows
``ordersXeu``); policyuniverse and parliament parse and lint policies but
decide no request; sibyl-aws asks AWS's own simulator (an account and the
network) and folds the case of resources; aws-why is a binary that does the
same; iamspy has had one release, in 2022. So this module stays small, and
tests/integration/test_devserver_policy_oracle.py holds it to an IAM policy
evaluator (@cloud-copilot/iam-simulate, tests/support/iam.py) on generated
policies and ARNs.

Evaluated as IAM evaluates it:

- ``Allow`` and ``Deny``: a statement that matches and denies wins over any
  that allows; with none that allows, the request is denied (implicitly).
- ``Action`` / ``NotAction``: ``service:action``, ``*`` any run of characters
  and ``?`` one; the service prefix and the action's name fold case; ``*``
  alone is every action.
- ``Resource`` / ``NotResource``: ``*`` alone is every resource. An ARN's
  partition, service, region and account are compared part by part (their
  case folded), its resource part (``api-id/stage/METHOD/path``) as written
  (case kept) and as a whole, so a ``*`` there spans ``/``. An ARN of fewer
  than six parts whose last part ends in ``*`` matches whatever follows
  (as a Resource; as a NotResource it is refused, IAM's evaluators read it
  apart).

Refused when the policy is read, so that the dev server does not start with
a policy it would read otherwise than AWS does, never ignored:

- ``Condition``: no condition is evaluated. The condition keys of a request
  here (``aws:SourceIp``, ``aws:SecureTransport``, ``aws:CurrentTime``,
  ``aws:PrincipalTag/...``) are not the ones it will have in AWS, so an
  answer from them would mislead.
- policy variables (``${aws:username}``): the identity here is not the one
  IAM would substitute.
- ``Principal`` / ``NotPrincipal`` (a resource policy's elements), a
  wildcard in the service of an action or an ARN, a resource that is neither
  ``*`` nor an ARN, an element IAM does not know.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The one action API Gateway asks IAM about for a request.
INVOKE = "execute-api:Invoke"
ALLOWED = "Allowed"
IMPLICITLY_DENIED = "ImplicitlyDenied"
EXPLICITLY_DENIED = "ExplicitlyDenied"

_VERSIONS = ("2012-10-17", "2008-10-17")
_STATEMENT_ELEMENTS = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource"}
_SERVICE = re.compile(r"[A-Za-z0-9-]+")
_ACTION_NAME = re.compile(r"[A-Za-z0-9*?]+")
# arn, partition, service, region, account, resource: the resource part may hold colons.
_ARN_PARTS = 6


class PolicyError(ValueError):
    """A policy the dev server will not evaluate; the message says why and what to do."""


@dataclass(frozen=True)
class Statement:
    """One statement: its effect, its actions (or the actions it excludes)
    and its resources (or those it excludes)."""

    label: str  # its Sid, else "statement N" (1-based)
    effect: str  # "Allow" or "Deny"
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool

    def acts(self, action: str) -> bool:
        """Whether ``action`` is among its actions (or not excluded by them)."""
        return any(action_matches(pattern, action) for pattern in self.actions) != self.not_action

    def applies(self, action: str, resource: str) -> bool:
        return (
            self.acts(action)
            and any(resource_matches(p, resource) for p in self.resources) != self.not_resource
        )


@dataclass(frozen=True)
class Decision:
    """IAM's answer: ``result`` is ALLOWED, IMPLICITLY_DENIED or
    EXPLICITLY_DENIED; ``statement`` is the one that decided (the Deny that
    matched, else the first Allow that matched; None: no statement matched)."""

    result: str
    statement: Statement | None

    @property
    def allowed(self) -> bool:
        return self.result == ALLOWED

    def because(self, policy: str) -> str:
        if self.statement is None:
            return f"no statement of {policy} allows it"
        verb = "allows" if self.allowed else "denies"
        return f"{self.statement.label} of {policy} {verb} it"


@dataclass(frozen=True)
class Policy:
    """An identity-based policy, checked when read (``parse``)."""

    name: str  # what messages call it: "ClientPolicy of template.yaml", "orders.json"
    statements: tuple[Statement, ...]

    def decide(self, action: str, resource: str) -> Decision:
        allowing = None
        for statement in self.statements:
            if not statement.applies(action, resource):
                continue
            if statement.effect == "Deny":
                return Decision(EXPLICITLY_DENIED, statement)
            allowing = allowing or statement
        return Decision(ALLOWED, allowing) if allowing else Decision(IMPLICITLY_DENIED, None)


def parse(document: Any, name: str) -> Policy:
    """``document`` (a policy as JSON decodes it) as a Policy; PolicyError
    naming ``name`` and the statement when the dev server would evaluate it
    otherwise than IAM does, or IAM would refuse it."""
    if not isinstance(document, Mapping):
        kind = type(document).__name__
        raise PolicyError(f"{name}: a policy is a JSON object with a Statement, not a {kind}")
    unknown = set(document) - {"Version", "Id", "Statement"}
    if unknown:
        raise PolicyError(f"{name}: a policy has Version, Id and Statement, not {', '.join(sorted(unknown))}")
    version = document.get("Version", "2008-10-17")
    if version not in _VERSIONS:
        raise PolicyError(f"{name}: Version {version!r} is not an IAM policy version (2012-10-17)")
    statements = document.get("Statement")
    if isinstance(statements, Mapping):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise PolicyError(f"{name}: the policy has no Statement")
    return Policy(name, tuple(_statement(s, i, name) for i, s in enumerate(statements, start=1)))


def read(path: Path) -> Policy:
    """The policy document in the JSON file at ``path``."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"cannot read the policy {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PolicyError(f"{path} is not JSON: {exc}") from None
    return parse(document, str(path))


def _statement(raw: Any, index: int, policy: str) -> Statement:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{policy}: statement {index} is not a JSON object")
    sid = raw.get("Sid")
    label = f"statement {sid!r}" if isinstance(sid, str) and sid else f"statement {index}"
    where = f"{policy}, {label}"
    if "Condition" in raw:
        raise PolicyError(
            f"{where} has a Condition, which the dev server does not evaluate: the condition keys "
            "of a request here (source address, time, tags...) are not those it will have in AWS. "
            "Give the dev server a copy of the policy without the statement, or without its Condition"
        )
    if "Principal" in raw or "NotPrincipal" in raw:
        raise PolicyError(
            f"{where} names a Principal: that is a resource policy's element; an identity's policy "
            "(a role's, a user's) has none"
        )
    unknown = set(raw) - _STATEMENT_ELEMENTS
    if unknown:
        raise PolicyError(f"{where}: {', '.join(sorted(unknown))} is not an element of a statement")
    if raw.get("Effect") not in ("Allow", "Deny"):
        raise PolicyError(f"{where}: Effect must be Allow or Deny, not {raw.get('Effect')!r}")
    actions, not_action = _one_of(raw, "Action", where)
    resources, not_resource = _one_of(raw, "Resource", where)
    for action in actions:
        _check_action(action, where)
    for resource in resources:
        _check_resource(resource, where, not_resource)
    return Statement(label, raw["Effect"], actions, not_action, resources, not_resource)


def _one_of(raw: Mapping[str, Any], element: str, where: str) -> tuple[tuple[str, ...], bool]:
    """The values of ``element`` or of Not``element`` (exactly one is
    given), and whether it was the Not."""
    given = [key for key in (element, f"Not{element}") if key in raw]
    if len(given) != 1:
        raise PolicyError(f"{where} needs exactly one of {element} and Not{element}")
    values = raw[given[0]]
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise PolicyError(f"{where}: {given[0]} is a string or a list of strings")
    return tuple(values), given[0].startswith("Not")


def _check_action(action: str, where: str) -> None:
    if action == "*":
        return
    service, colon, name = action.partition(":")
    if not colon or not _SERVICE.fullmatch(service) or not _ACTION_NAME.fullmatch(name):
        raise PolicyError(
            f"{where}: {action!r} is not an action (service:Action, e.g. execute-api:Invoke; "
            "wildcards only in the action's name)"
        )


def _check_resource(resource: str, where: str, not_resource: bool) -> None:
    if "${" in resource:
        raise PolicyError(
            f"{where}: {resource!r} holds a policy variable, which the dev server does not "
            "substitute (it does not know the principal IAM would): write the ARN out, or use a wildcard"
        )
    if resource == "*":
        return
    parts = resource.split(":", _ARN_PARTS - 1)
    if parts[0] != "arn" or len(parts) < 3:
        raise PolicyError(f"{where}: {resource!r} is neither * nor an ARN (arn:aws:execute-api:...)")
    if "*" in parts[2] or "?" in parts[2]:
        raise PolicyError(f"{where}: {resource!r} has a wildcard in its service, which IAM does not allow")
    if len(parts) < _ARN_PARTS and not parts[-1].endswith("*"):
        raise PolicyError(
            f"{where}: {resource!r} is not a whole ARN (arn:partition:service:region:account:resource)"
        )
    if len(parts) < _ARN_PARTS and not_resource:
        # IAM's policy evaluators part ways on what such a NotResource leaves out.
        whole = ":".join(parts + ["*"] * (_ARN_PARTS - len(parts)))
        raise PolicyError(
            f"{where}: the NotResource {resource!r} is short of an ARN's six parts; write them all "
            f"({whole}), which every evaluator reads alike"
        )


def action_matches(pattern: str, action: str) -> bool:
    """Whether the Action ``pattern`` names ``action`` (service:Name)."""
    if pattern == "*":
        return True
    service, _, name = pattern.partition(":")
    wanted_service, _, wanted_name = action.partition(":")
    return (
        service.lower() == wanted_service.lower()
        and _glob(name, fold_case=True).fullmatch(wanted_name) is not None
    )


def resource_matches(pattern: str, arn: str) -> bool:
    """Whether the Resource ``pattern`` names the resource ``arn``."""
    if pattern == "*":
        return True
    parts = pattern.split(":", _ARN_PARTS - 1)
    # A short ARN ends in *, which runs on over the colons (checked when read).
    parts += ["*"] * (_ARN_PARTS - len(parts))
    given = arn.split(":", _ARN_PARTS - 1)
    if len(given) != _ARN_PARTS or parts[0] != given[0]:
        return False
    fixed = all(_glob(p, fold_case=True).fullmatch(g) for p, g in zip(parts[1:5], given[1:5], strict=True))
    return fixed and _glob(parts[5], fold_case=False).fullmatch(given[5]) is not None


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, *, fold_case: bool) -> re.Pattern[str]:
    """IAM's wildcards as a regular expression: ``*`` any run of characters
    (``/`` included), ``?`` any one; every other character only itself."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if fold_case else 0))


def invoke_statements(policy: Policy) -> Iterable[Statement]:
    """The statements that can decide an INVOKE."""
    return (s for s in policy.statements if s.acts(INVOKE))
