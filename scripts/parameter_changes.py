"""What an update that changes one parameter does to a deployed stack: which
resources it updates in place, which it replaces, and which it creates or
deletes. docs/deploy.md's table is made from it (scripts/docs_tables.py), and
tests/infra/test_parameter_changes.py holds both to template.yaml.

    python -m scripts.parameter_changes      print each change

Each change is read from template.yaml as CloudFormation deploys it
(localrun.template: the language extensions, then the SAM transform) with the
parameter's value before and after. CloudFormation replaces a resource when
its logical id changes (SAM names a deployment, a published version or a layer
version after a hash of what it holds, a stage after its name) or when a
property its type's schema lists as create-only changes (cfn-lint's copy of
CloudFormation's resource schemas), and then replaces whatever names it in a
create-only property too.

A replaced resource that callers hold (HELD: a policy attached to their roles,
the table with the counters, the log groups with the allocation records, the
layer, the API, its stage, its domain, the usage plan their keys are in) gets a
new name or ARN, or loses its data; and a deleted one is gone. No change may do
either unless ON_PURPOSE says why, and docs/deploy.md shows it.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from localrun.template import default_template, template_with

# Resource types whose replacement or deletion changes what callers hold.
HELD = {
    "AWS::IAM::ManagedPolicy": "policy",
    "AWS::DynamoDB::Table": "table",
    "AWS::Logs::LogGroup": "log group",
    "AWS::Lambda::LayerVersion": "layer",
    "AWS::ApiGateway::RestApi": "API",
    "AWS::ApiGateway::Stage": "stage",
    "AWS::ApiGateway::DomainName": "domain",
    "AWS::ApiGateway::UsagePlan": "usage plan",
}

# The changes of a parameter shown besides its default's: (settings the
# change is made with, value before, value after). A parameter with
# AllowedValues changes from its default to each other value; a number without
# them, from its default to the next number it takes; a string without them
# needs its changes here.
AUTHS = ("AWS_IAM", "API_KEY", "NONE")
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/1"
DOMAIN = {"CustomDomainName": "ids.example.com", "CustomDomainCertificateArn": CERTIFICATE}
API_KEYS = {"ClientAuth": "API_KEY"}
KEPT_TABLE = "idblocks-CountersTable-1A2B3C4D5E6F"
ORGANIZATION = "o-abcdefghij"
ENDPOINTS = {"VpcEndpointIds": "vpce-0123456789abcdef0"}
PRIVATE = {"EndpointType": "PRIVATE"}
CHANGES: dict[str, list[tuple[dict[str, str], str, str]]] = {
    "StageName": [({}, "v1", "v2")],
    # Between any two: each value has resources of its own.
    "ClientAuth": [({}, before, after) for before in AUTHS for after in AUTHS if before != after],
    "UsageQuotaPerDay": [(API_KEYS, "0", "250000"), (API_KEYS, "250000", "500000")],
    "ClientCounters": [({}, "*", "orders")],
    "AlarmTopicArn": [({}, "", "arn:aws:sns:us-east-1:123456789012:alarms")],
    "OpenTelemetryLayerArn": [
        ({}, "", "arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython:8")
    ],
    "CustomDomainName": [
        ({"CustomDomainCertificateArn": CERTIFICATE}, "", "ids.example.com"),
        ({"CustomDomainCertificateArn": CERTIFICATE}, "ids.example.com", "api.example.com"),
    ],
    "CustomDomainCertificateArn": [
        ({"CustomDomainName": "ids.example.com"}, CERTIFICATE, CERTIFICATE.replace("/1", "/2")),
    ],
    "CustomDomainBasePath": [(DOMAIN, "v1", "v2"), (DOMAIN, "v1", "")],
    "DisableExecuteApiEndpoint": [({}, "true", "false"), (DOMAIN, "true", "false")],
    # Onto the table a deleted stack of the same name left, and back.
    "ExistingCountersTable": [({}, "", KEPT_TABLE), ({}, KEPT_TABLE, "")],
    "CounterRepairRoleArn": [({}, "", "arn:aws:iam::123456789012:role/id-repair")],
    "CallerOrganizationId": [({}, "", ORGANIZATION)],
    "CallerAccounts": [({}, "", "210987654321,111122223333")],
    "EndpointType": [({}, "REGIONAL", "PRIVATE"), ({}, "PRIVATE", "REGIONAL")],
    "VpcEndpointIds": [(PRIVATE, ENDPOINTS["VpcEndpointIds"], "vpce-0123456789abcdef0,vpce-11112222")],
}

# Values the template's rules refuse without others: a stack with one of
# them has those too, so a change to or from it changes them in the same
# update. A private API needs its endpoints, and endpoints are refused
# without a private API.
ALONG: dict[tuple[str, str], dict[str, str]] = {
    ("EndpointType", "PRIVATE"): ENDPOINTS,
}

# Held resources a change replaces or deletes on purpose: (parameter, the
# resource's type) -> why, as docs/deploy.md says it.
ON_PURPOSE = {
    ("StageName", "AWS::ApiGateway::Stage"): (
        "the stage's name is the first segment of every URL: the stage under the new name replaces it, "
        "and callers move to the new ApiUrl"
    ),
    ("CustomDomainName", "AWS::ApiGateway::DomainName"): (
        "a custom domain is its name: the new name's replaces it; point its DNS at the new CustomDomainTarget"
    ),
    ("ClientAuth", "AWS::IAM::ManagedPolicy"): (
        "callers no longer sign their requests: detach ClientPolicyArn from their roles first (IAM refuses "
        "to delete a policy still attached, and CloudFormation then leaves it, with what it allows, behind)"
    ),
    ("ClientAuth", "AWS::ApiGateway::UsagePlan"): (
        "callers no longer send API keys: the usage plan and its keys' association with the API go"
    ),
    ("ExistingCountersTable", "AWS::DynamoDB::Table"): (
        "the stack stops creating its counters table and uses the one the parameter names; the table "
        "leaves the stack but is not deleted (DeletionPolicy Retain), counters and resource policy "
        "included: name it (the CountersTableName output) to go on with its counters"
    ),
}


@dataclass(frozen=True)
class Change:
    """One parameter changed from ``before`` to ``after`` (other parameters as
    ``settings``, else their defaults), and the resources it updates, replaces,
    creates and deletes, by logical id (SAM's hashed ids without their hash)."""

    parameter: str
    before: str
    after: str
    settings: tuple[tuple[str, str], ...]
    updated: tuple[str, ...]
    replaced: tuple[str, ...]
    created: tuple[str, ...]
    deleted: tuple[str, ...]
    # what each of those resources is: logical id -> resource type
    types: tuple[tuple[str, str], ...]
    # those of ``deleted`` whose DeletionPolicy keeps them: they leave the
    # stack, not the account
    retained: tuple[str, ...] = ()
    # other parameters the same update changes (ALONG): (name, before, after)
    along: tuple[tuple[str, str, str], ...] = ()

    def held(self, ids: tuple[str, ...]) -> tuple[str, ...]:
        types = dict(self.types)
        return tuple(logical_id for logical_id in ids if types[logical_id] in HELD)


@functools.cache
def _deployed(settings: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The resources CloudFormation creates with these parameter values: the
    transformed template without those a false condition leaves out."""
    return template_with(settings).created


@functools.cache
def create_only(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """The create-only properties of a resource type (its schema's
    createOnlyProperties), each as the keys of its path under Properties."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
    paths = []
    for pointer in schema.get("createOnlyProperties", []):
        parts = pointer.split("/")[1:]
        assert parts[0] == "properties", pointer
        paths.append(tuple(parts[1:]))
    return tuple(paths)


def _at(properties: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = properties
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


_SAM_HASH = re.compile(r"[0-9a-f]{10}$")


def _identity(logical_id: str, resource: dict[str, Any], values: tuple[str, str]) -> tuple[str, str]:
    """What a resource is whatever its logical id's hash or the changed value
    in it: SAM names deployments, versions and layer versions after a hash of
    what they hold, stages and their permissions after the stage's name."""
    name = _SAM_HASH.sub("", logical_id)
    for value in values:
        if value.isalnum() and value in name:
            name = name.replace(value, "")
    return resource["Type"], name


def _names(value: Any) -> set[str]:
    """The logical ids ``value`` refers to: Ref, Fn::GetAtt, Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            found.add(target[0] if isinstance(target, list) else str(target).split(".")[0])
        if "Fn::Sub" in value:
            text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
            found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!][^}]*)\}", text)}
        for item in value.values():
            found |= _names(item)
    elif isinstance(value, list):
        for item in value:
            found |= _names(item)
    return found


def values_of(parameter: str, value: str, settings: dict[str, str]) -> dict[str, str]:
    """The parameters given (the others keep their defaults) of a stack
    where ``parameter`` is ``value``: ``settings``, and what ALONG says
    goes with that value."""
    return settings | ALONG.get((parameter, value), {}) | {parameter: value}


def change(parameter: str, before: str, after: str, settings: dict[str, str] | None = None) -> Change:
    settings = dict(settings or {})
    old_values, new_values = values_of(parameter, before, settings), values_of(parameter, after, settings)
    defaults = default_template().parameters
    along = tuple(
        (name, old_values.get(name, defaults[name]), new_values.get(name, defaults[name]))
        for name in sorted((set(old_values) | set(new_values)) - {parameter})
        if old_values.get(name, defaults[name]) != new_values.get(name, defaults[name])
    )
    old = _deployed(tuple(sorted(old_values.items())))
    new = _deployed(tuple(sorted(new_values.items())))
    values = (before, after)
    renamed: dict[str, str] = {}  # new logical id -> old, for a resource whose id changed
    gone = {_identity(k, r, values): k for k, r in old.items() if k not in new}
    for logical_id, resource in new.items():
        if logical_id not in old and _identity(logical_id, resource, values) in gone:
            renamed[logical_id] = gone.pop(_identity(logical_id, resource, values))
    created = {k for k in new if k not in old and k not in renamed}
    deleted = set(gone.values())
    retained = {k for k in deleted if old[k].get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")}
    replaced = {old_id for old_id in renamed.values()}
    updated = set()
    for logical_id in set(new) & set(old):
        resource, previous = new[logical_id], old[logical_id]
        if any(
            _at(resource.get("Properties", {}), path) != _at(previous.get("Properties", {}), path)
            for path in create_only(resource["Type"])
        ):
            replaced.add(logical_id)
        elif resource != previous:
            updated.add(logical_id)
    # What names a replaced resource gets its new name or ARN: replaced too
    # where it names it in a create-only property, else updated.
    while True:
        more = {
            logical_id
            for logical_id in set(new) & set(old)
            if logical_id not in replaced
            and any(
                _names(_at(new[logical_id].get("Properties", {}), path)) & replaced
                for path in create_only(new[logical_id]["Type"])
            )
        }
        if not more:
            break
        replaced |= more
    updated |= {
        logical_id
        for logical_id in set(new) & set(old)
        if logical_id not in replaced and _names(new[logical_id]) & replaced
    }
    updated -= replaced

    def shown(logical_id: str) -> str:
        """Its logical id in the stack before the change, without SAM's hash."""
        return _SAM_HASH.sub("", renamed.get(logical_id, logical_id))

    types = {shown(k): (new | old)[k]["Type"] for k in set(new) | set(old)}
    return Change(
        parameter=parameter,
        before=before,
        after=after,
        settings=tuple(sorted(settings.items())),
        updated=tuple(sorted({shown(k) for k in updated})),
        replaced=tuple(sorted({shown(k) for k in replaced})),
        created=tuple(sorted({shown(k) for k in created})),
        deleted=tuple(sorted({shown(k) for k in deleted})),
        types=tuple(sorted(types.items())),
        retained=tuple(sorted({shown(k) for k in retained})),
        along=along,
    )


def _next_number(spec: dict[str, Any]) -> str:
    default = int(spec["Default"])
    if default + 1 <= int(spec.get("MaxValue", default + 1)):
        return str(default + 1)
    return str(default - 1)


def changes_of(parameter: str) -> list[tuple[dict[str, str], str, str]]:
    """The changes of ``parameter`` that the table shows."""
    if parameter in CHANGES:
        return CHANGES[parameter]
    spec = default_template().raw["Parameters"][parameter]
    default = str(spec.get("Default", ""))
    if spec["Type"] == "Number":
        allowed = [str(value) for value in spec.get("AllowedValues", [])]
        return [({}, default, allowed[allowed.index(default) - 1] if allowed else _next_number(spec))]
    if "AllowedValues" in spec:
        return [({}, default, str(value)) for value in spec["AllowedValues"] if str(value) != default]
    raise ValueError(
        f"{parameter}: no change of it is described; add one to CHANGES in scripts/parameter_changes.py"
    )


def all_changes() -> Iterator[Change]:
    for parameter in default_template().raw["Parameters"]:
        for settings, before, after in changes_of(parameter):
            yield change(parameter, before, after, settings)


def on_purpose(each: Change) -> dict[str, str]:
    """The held resources ``each`` replaces or deletes, each with why it may
    (ON_PURPOSE); a ValueError names one it may not."""
    types = dict(each.types)
    found = {}
    for logical_id in (*each.held(each.replaced), *each.held(each.deleted)):
        why = ON_PURPOSE.get((each.parameter, types[logical_id]))
        if why is None:
            raise ValueError(
                f"changing {each.parameter} from {each.before!r} to {each.after!r} "
                f"{'replaces' if logical_id in each.replaced else 'deletes'} {logical_id} "
                f"({HELD[types[logical_id]]}), which callers hold: keep it, or say why in ON_PURPOSE "
                "(scripts/parameter_changes.py) and in docs/deploy.md"
            )
        found[logical_id] = why
    return found


# A function's published version and its alias "live": every change that
# updates a function replaces the one and updates the other (docs/deploy.md,
# Changing a parameter), so the table names the function alone.
_FOLLOWS_FUNCTION = re.compile(r"^(\w+Function)(Version|Aliaslive)$")


def _ids(ids: tuple[str, ...], functions: set[str], retained: tuple[str, ...] = ()) -> str:
    shown = [i for i in ids if not ((found := _FOLLOWS_FUNCTION.match(i)) and found[1] in functions)]
    return ", ".join(f"`{i}` (kept: Retain)" if i in retained else f"`{i}`" for i in shown)


def _value(value: str) -> str:
    if not value:
        return "empty"
    return "an ARN" if value.startswith("arn:") else f"`{value}`"


def _setting(name: str, value: str) -> str:
    return f"a `{name}`" if value.startswith("arn:") else f"`{name}` {_value(value)}"


def table() -> str:
    """docs/deploy.md's table: one row per parameter and change (changes of a
    parameter with the same effect in one row), then why a held resource is
    replaced or deleted where one is."""
    rows = [
        "| Parameter | change | updates | replaces | creates | deletes |",
        "|---|---|---|---|---|---|",
    ]
    reasons: dict[tuple[str, str], str] = {}
    grouped: dict[tuple[Any, ...], list[Change]] = {}
    for each in all_changes():
        for logical_id, why in on_purpose(each).items():
            reasons[each.parameter, logical_id] = why
        effect = (each.updated, each.replaced, each.created, each.deleted, each.retained)
        grouped.setdefault((each.parameter, each.before, each.settings, each.along, *effect), []).append(each)
    for (
        parameter,
        before,
        settings,
        along,
        updated,
        replaced,
        created,
        deleted,
        retained,
    ), group in grouped.items():
        functions = {i for i in updated if i.endswith("Function")}
        after = ", ".join(_value(each.after) for each in group)
        if after == _value(before):
            after = "another"
        change_text = f"{_value(before)} → {after}"
        change_text += "".join(f", `{name}` {_value(old)} → {_value(new)}" for name, old, new in along)
        if settings:
            change_text += " (with " + ", ".join(_setting(name, value) for name, value in settings) + ")"
        cells = [_ids(ids, functions) for ids in (updated, replaced, created)] + [
            _ids(deleted, functions, retained)
        ]
        rows.append(f"| `{parameter}` | {change_text} | {' | '.join(cells)} |")
    lines = [*rows, ""]
    if reasons:
        lines += ["Replaced or deleted on purpose, of what callers hold:", ""]
        lines += [f"- `{parameter}`, `{held}`: {why}." for (parameter, held), why in reasons.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    print(table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
