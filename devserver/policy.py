"""IAM policy evaluation for the dev server: whether an identity's policy,
and the API's resource policy, allow ``execute-api:Invoke`` on a request's
ARN, each decided as IAM decides it, and the two together as API Gateway
combines them (``gateway_decision``).

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

- ``Condition``, on the keys the dev server knows a request's value of:
  ``aws:PrincipalAccount``, ``aws:PrincipalOrgID`` and ``aws:PrincipalArn``
  (the identity's, devserver.identities) and ``aws:SourceVpce`` (the
  endpoint requests come through, --source-vpce), each with
  ``StringEquals``, ``StringNotEquals``, ``StringLike`` or
  ``StringNotLike`` (``aws:PrincipalArn`` with ``ArnEquals``, ``ArnLike``,
  ``ArnNotEquals`` or ``ArnNotLike`` too). Operators hold together, keys
  within an operator too, and a key's values are alternatives. A key the
  request does not have matches nothing, so its ``...Not...`` operator
  holds (IAM user guide, "IAM JSON policy elements: Condition operators").
- ``Principal`` in a resource policy (``parse(..., resource=True)``): ``*``
  (or ``{"AWS": "*"}``), every caller; the statements say whom they mean by
  their conditions.

Refused when the policy is read, so that the dev server does not start with
a policy it would read otherwise than AWS does, never ignored:

- any other condition key or operator: the other keys of a request here
  (``aws:SourceIp``, ``aws:SecureTransport``, ``aws:CurrentTime``,
  ``aws:PrincipalTag/...``) are not the ones it will have in AWS, so an
  answer from them would mislead; and a set operator (``ForAnyValue:``),
  ``...IfExists`` or ``Null``.
- policy variables (``${aws:username}``): the identity here is not the one
  IAM would substitute.
- ``Principal`` / ``NotPrincipal`` in an identity's policy, a ``Principal``
  naming accounts or roles, or none, in a resource policy, ``NotPrincipal``
  anywhere; a wildcard in the service of an action or an ARN, a resource
  that is neither ``*`` nor an ARN, an element IAM does not know.

How API Gateway combines them (its developer guide, "How API Gateway
resource policies affect authorization workflow"): an explicit deny in
either wins; with IAM auth, a caller of the API's own account is allowed
when either allows, a caller of another account only when both do (with no
resource policy, never); a route without IAM auth is open unless the API
has a resource policy, which must then allow.
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
_STATEMENT_ELEMENTS = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}
# The condition keys a request here has a value of, by their name folded
# (IAM compares keys' names without case), as IAM spells them.
CONDITION_KEYS = {
    key.lower(): key
    for key in ("aws:PrincipalAccount", "aws:PrincipalOrgID", "aws:PrincipalArn", "aws:SourceVpce")
}
# Each operator: whether it is negated, how a value is compared, and the keys it takes.
_STRING_KEYS = frozenset(CONDITION_KEYS)
_ARN_KEYS = frozenset({"aws:principalarn"})
_OPERATORS = {
    "StringEquals": (False, "equals", _STRING_KEYS),
    "StringNotEquals": (True, "equals", _STRING_KEYS),
    "StringLike": (False, "like", _STRING_KEYS),
    "StringNotLike": (True, "like", _STRING_KEYS),
    "ArnEquals": (False, "arn", _ARN_KEYS),
    "ArnLike": (False, "arn", _ARN_KEYS),
    "ArnNotEquals": (True, "arn", _ARN_KEYS),
    "ArnNotLike": (True, "arn", _ARN_KEYS),
}
_SERVICE = re.compile(r"[A-Za-z0-9-]+")
_ACTION_NAME = re.compile(r"[A-Za-z0-9*?]+")
# arn, partition, service, region, account, resource: the resource part may hold colons.
_ARN_PARTS = 6


class PolicyError(ValueError):
    """A policy the dev server will not evaluate; the message says why and what to do."""


@dataclass(frozen=True)
class Condition:
    """One key of one operator of a statement's Condition, and its values."""

    operator: str
    key: str  # its name folded
    values: tuple[str, ...]

    def holds(self, context: Mapping[str, str]) -> bool:
        """Whether it holds for a request whose condition keys (by their name
        folded) have the values ``context`` gives."""
        negated, comparison, _ = _OPERATORS[self.operator]
        given = context.get(self.key)
        if given is None:
            return negated
        if comparison == "equals":
            matched = given in self.values
        elif comparison == "like":
            matched = any(_glob(value, fold_case=False).fullmatch(given) for value in self.values)
        else:
            matched = any(_arn_like(value, given) for value in self.values)
        return matched != negated


@dataclass(frozen=True)
class Statement:
    """One statement: its effect, its actions (or the actions it excludes),
    its resources (or those it excludes) and its conditions, all of which
    must hold."""

    label: str  # its Sid, else "statement N" (1-based)
    effect: str  # "Allow" or "Deny"
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: tuple[Condition, ...] = ()

    def acts(self, action: str) -> bool:
        """Whether ``action`` is among its actions (or not excluded by them)."""
        return any(action_matches(pattern, action) for pattern in self.actions) != self.not_action

    def applies(self, action: str, resource: str, context: Mapping[str, str] | None = None) -> bool:
        return (
            self.acts(action)
            and any(resource_matches(p, resource) for p in self.resources) != self.not_resource
            and all(condition.holds(context or {}) for condition in self.conditions)
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
    """An identity-based policy, or an API's resource policy, checked when
    read (``parse``)."""

    name: str  # what messages call it: "ClientPolicy of template.yaml", "orders.json"
    statements: tuple[Statement, ...]

    def decide(self, action: str, resource: str, context: Mapping[str, str] | None = None) -> Decision:
        """IAM's decision on ``action`` on ``resource`` for a request whose
        condition keys have the values ``context`` gives (by any case of
        their names)."""
        folded = {key.lower(): value for key, value in (context or {}).items()}
        allowing = None
        for statement in self.statements:
            if not statement.applies(action, resource, folded):
                continue
            if statement.effect == "Deny":
                return Decision(EXPLICITLY_DENIED, statement)
            allowing = allowing or statement
        return Decision(ALLOWED, allowing) if allowing else Decision(IMPLICITLY_DENIED, None)


def parse(document: Any, name: str, *, resource: bool = False) -> Policy:
    """``document`` (a policy as JSON decodes it) as a Policy; PolicyError
    naming ``name`` and the statement when the dev server would evaluate it
    otherwise than IAM does, or IAM would refuse it. ``resource``: it is a
    resource policy, whose statements each name their Principal."""
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
    return Policy(name, tuple(_statement(s, i, name, resource) for i, s in enumerate(statements, start=1)))


def read(path: Path) -> Policy:
    """The policy document in the JSON file at ``path``."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"cannot read the policy {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PolicyError(f"{path} is not JSON: {exc}") from None
    return parse(document, str(path))


def _statement(raw: Any, index: int, policy: str, resource: bool = False) -> Statement:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{policy}: statement {index} is not a JSON object")
    sid = raw.get("Sid")
    label = f"statement {sid!r}" if isinstance(sid, str) and sid else f"statement {index}"
    where = f"{policy}, {label}"
    if resource:
        _check_principal(raw, where)
    elif "Principal" in raw or "NotPrincipal" in raw:
        raise PolicyError(
            f"{where} names a Principal: that is a resource policy's element; an identity's policy "
            "(a role's, a user's) has none"
        )
    conditions = _conditions(raw["Condition"], where) if "Condition" in raw else ()
    unknown = set(raw) - _STATEMENT_ELEMENTS - ({"Principal"} if resource else set())
    if unknown:
        raise PolicyError(f"{where}: {', '.join(sorted(unknown))} is not an element of a statement")
    if raw.get("Effect") not in ("Allow", "Deny"):
        raise PolicyError(f"{where}: Effect must be Allow or Deny, not {raw.get('Effect')!r}")
    actions, not_action = _one_of(raw, "Action", where)
    resources, not_resource = _one_of(raw, "Resource", where)
    for action in actions:
        _check_action(action, where)
    for each in resources:
        _check_resource(each, where, not_resource)
    return Statement(label, raw["Effect"], actions, not_action, resources, not_resource, conditions)


def _check_principal(raw: Mapping[str, Any], where: str) -> None:
    """A resource policy's statement names every caller, ``*``: whom it
    means is said by its conditions, which the dev server evaluates from
    the identity's account, Organization and ARN."""
    if "NotPrincipal" in raw:
        raise PolicyError(f"{where} has a NotPrincipal, which the dev server does not evaluate")
    if raw.get("Principal") not in ("*", {"AWS": "*"}):
        raise PolicyError(
            f"{where}: the dev server evaluates a resource policy's statement whose Principal is * "
            f"(say whom it means with a Condition on aws:PrincipalAccount, aws:PrincipalOrgID or "
            f"aws:PrincipalArn), not {raw.get('Principal')!r}"
        )


def _conditions(raw: Any, where: str) -> tuple[Condition, ...]:
    supported = (
        f"it evaluates {', '.join(_OPERATORS)} on {', '.join(CONDITION_KEYS.values())} "
        "(the Arn operators on aws:PrincipalArn only), the keys whose value a request here has as it "
        "will in AWS"
    )
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: a Condition is a JSON object of operators")
    found = []
    for operator, keys in raw.items():
        if operator not in _OPERATORS:
            raise PolicyError(
                f"{where} has a Condition, which the dev server does not evaluate: {operator}; {supported}"
            )
        if not isinstance(keys, Mapping) or not keys:
            raise PolicyError(f"{where}: the Condition's {operator} is a JSON object of keys and values")
        for key, values in keys.items():
            folded = str(key).lower()
            if folded not in _OPERATORS[operator][2]:
                raise PolicyError(
                    f"{where} has a Condition, which the dev server does not evaluate: {operator} on "
                    f"{key}; {supported}"
                )
            values = [values] if isinstance(values, str) else values
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise PolicyError(
                    f"{where}: the values of {operator} on {key} are a string or a list of strings"
                )
            for value in values:
                if "${" in value:
                    raise PolicyError(
                        f"{where}: {value!r} holds a policy variable, which the dev server does not "
                        "substitute"
                    )
            found.append(Condition(operator, folded, tuple(values)))
    return tuple(found)


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


def _arn_like(pattern: str, arn: str) -> bool:
    """ArnLike (and ArnEquals, which IAM reads alike): the six parts of an
    ARN compared one by one, each with its wildcards, case kept."""
    parts, given = pattern.split(":", _ARN_PARTS - 1), arn.split(":", _ARN_PARTS - 1)
    if len(parts) != _ARN_PARTS or len(given) != _ARN_PARTS:
        return False
    return all(_glob(p, fold_case=False).fullmatch(g) for p, g in zip(parts, given, strict=True))


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, *, fold_case: bool) -> re.Pattern[str]:
    """IAM's wildcards as a regular expression: ``*`` any run of characters
    (``/`` included), ``?`` any one; every other character only itself."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if fold_case else 0))


def invoke_statements(policy: Policy) -> Iterable[Statement]:
    """The statements that can decide an INVOKE."""
    return (s for s in policy.statements if s.acts(INVOKE))


def gateway_decision(identity: Decision | None, resource: Decision | None, *, same_account: bool) -> str:
    """What API Gateway answers from the caller's IAM decision (None: the
    route takes no IAM auth) and the API's resource policy's (None: it has
    none): ALLOWED, IMPLICITLY_DENIED or EXPLICITLY_DENIED."""
    if any(d is not None and d.result == EXPLICITLY_DENIED for d in (identity, resource)):
        return EXPLICITLY_DENIED
    resource_allows = resource is not None and resource.allowed
    if identity is None:
        allowed = resource is None or resource_allows
    elif same_account:
        allowed = identity.allowed or resource_allows
    else:
        allowed = identity.allowed and resource_allows
    return ALLOWED if allowed else IMPLICITLY_DENIED
