"""A parameter that configures a function publishes a new version of it
when its value changes, read from what the SAM transform makes of
template.yaml. The API invokes each function's alias "live", which SAM
points at a version it names after a hash of the function's properties as
it reads them: a change that leaves that name as it was publishes nothing,
and the alias keeps invoking the old version with the old settings (with
RegionCount or RegionIndex, the old residue class: IDs another region also
hands out). Which parameters configure which function is read from the
template, not listed here."""

from __future__ import annotations

import re
from typing import Any

import pytest

from localrun.template import default_template
from scripts import sar_template
from tests.support.sam import translate

# What a function's properties hold that is not the function's own
# configuration: its API events (the API's routes and their auth) and its
# role's policies, which IAM reads at every call, whatever the version.
NOT_CONFIGURATION = ("Events", "Policies")
# A value of each parameter that neither lists its values nor is a Number:
# a second stage, deep traces with two releases of AWS's layer.
LAYER_ARN = "arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython:{}"
EXAMPLES = {
    "StageName": ["v2"],
    "OpenTelemetryLayerArn": [LAYER_ARN.format(13), LAYER_ARN.format(14)],
    # The table a deleted stack of the same name left behind.
    "ExistingCountersTable": ["idblocks-CountersTable-1A2B3C4D5E6F"],
}


def parameters_read(value: Any, raw: dict[str, Any]) -> set[str]:
    """The template parameters ``value`` reads: by Ref, by ${Name} in an
    Fn::Sub, and through the conditions its Fn::If and Condition name (and
    the conditions those name), read as `make sar` reads them."""
    found = sar_template._references(value)
    for condition in sar_template._condition_names(value):
        found |= parameters_read(raw["Conditions"][condition], raw)
    return found & set(raw["Parameters"])


def configured_by() -> dict[str, set[str]]:
    """Each parameter -> the functions whose configuration it reaches:
    through Globals.Function or the function's own properties."""
    raw = default_template().raw
    shared = parameters_read(raw.get("Globals", {}).get("Function", {}), raw)
    reached: dict[str, set[str]] = {}
    for logical_id, resource in default_template().of_type("AWS::Serverless::Function").items():
        own = {key: value for key, value in resource["Properties"].items() if key not in NOT_CONFIGURATION}
        for name in shared | parameters_read(own, raw):
            reached.setdefault(name, set()).add(logical_id)
    return reached


def values(name: str) -> list[str]:
    """The parameter's default, then other values it allows: every one it
    lists; a Number's neighbour, the smallest change; EXAMPLES for the rest."""
    spec = default_template().raw["Parameters"][name]
    default = str(spec.get("Default", ""))
    if "AllowedValues" in spec:
        others = [str(value) for value in spec["AllowedValues"] if str(value) != default]
    elif spec["Type"] == "Number":
        above = int(default) + 1
        others = [str(above if above <= spec.get("MaxValue", above) else int(default) - 1)]
    else:
        others = EXAMPLES.get(name, [])
    return [default, *others]


CONFIGURED_BY = configured_by()
CHANGES = [
    (name, before, after)
    for name in sorted(CONFIGURED_BY)
    for before, after in zip(values(name), values(name)[1:], strict=False)
]


def version_ids(**parameters: str) -> dict[str, str]:
    """Each function -> the logical id SAM gives its version for these parameter values."""
    cfn = translate(**parameters)
    return {
        resource["Properties"]["FunctionName"]["Ref"]: logical_id
        for logical_id, resource in cfn["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Version"
    }


def test_the_parameters_that_configure_functions_are_read_from_the_template():
    """What the derivation finds: the settings the functions read from their
    environment, their timeout, tracing, layers, SnapStart and concurrency;
    not what only feeds the API (ClientAuth, throttles) or the log groups."""
    assert {
        "RegionCount",
        "RegionIndex",
        "MaxBatchSize",
        "AllowGetNext",
        "AutoCreateCounters",
        "IdempotencyTtlSeconds",
        "FunctionTimeout",
        "LogLevel",
        "StageName",
        "Tracing",
        "OpenTelemetryLayerArn",
        "SnapStart",
    } <= set(CONFIGURED_BY)
    only_elsewhere = {"ClientAuth", "ThrottlingRateLimit", "LogRetentionDays", "ClientCounters"}
    assert not only_elsewhere & set(CONFIGURED_BY)
    assert CONFIGURED_BY["RegionCount"] == {"NextFunction", "BatchFunction", "AdminFunction"}
    assert CONFIGURED_BY["AdminReservedConcurrency"] == {"AdminFunction"}


@pytest.mark.parametrize("name", sorted(CONFIGURED_BY))
def test_each_such_parameter_has_another_value_to_change_to(name):
    """A parameter with neither listed values nor a Number's bounds needs an
    EXAMPLES value, one its AllowedPattern accepts."""
    spec = default_template().raw["Parameters"][name]
    taken = values(name)
    assert len(set(taken)) == len(taken) >= 2, f"give {name} a value to change to (EXAMPLES)"
    for value in taken:
        assert re.fullmatch(spec.get("AllowedPattern", ".*"), value), (name, value)


def _shown(value: str) -> str:
    return "''" if not value else value if len(value) <= 16 else f"{value[:4]}..{value[-3:]}"


@pytest.mark.parametrize(
    ("name", "before", "after"), CHANGES, ids=[f"{n}={_shown(a)}->{_shown(b)}" for n, a, b in CHANGES]
)
def test_a_parameter_change_publishes_a_new_version_of_each_function_it_configures(name, before, after):
    """An update that changes only this parameter names a new version of every
    function it reaches, so that CloudFormation publishes it and moves the
    alias "live", the one the API invokes, onto it."""
    old, new = version_ids(**{name: before}), version_ids(**{name: after})
    assert set(old) == set(new) >= CONFIGURED_BY[name]
    unchanged = sorted(function for function in CONFIGURED_BY[name] if old[function] == new[function])
    assert not unchanged, (
        f"{name} {before!r} -> {after!r} configures {unchanged} but leaves the version(s) "
        f"{[old[function] for function in unchanged]}: the alias would keep the old settings"
    )


def test_globals_hold_nothing_a_parameter_sets(template):
    """AWS::LanguageExtensions leaves Globals as written, where a Ref hashes
    alike whatever the parameter's value: what a parameter sets is in each
    function's own properties."""
    assert parameters_read(template.raw["Globals"]["Function"], template.raw) == set()


def test_the_functions_copies_of_what_the_parameters_set_are_alike(template):
    """Written three times, once per function: one that drifted would run
    with settings the others do not have."""
    copies = {
        name: {key: fn["Properties"][key] for key in ("Timeout", "Tracing", "Layers", "Environment")}
        for name, fn in template.of_type("AWS::Serverless::Function").items()
    }
    assert len(copies) == 3
    for name, copy in copies.items():
        assert copy == copies["NextFunction"], name


@pytest.mark.parametrize("timeout", ["15", "28"])
def test_local_runs_take_each_functions_own_settings(timeout):
    """The dev server and the in-process tests read each function's timeout
    and environment where the template now keeps them."""
    from localrun.tables import TABLE_NAMES
    from localrun.template import Template

    template = Template(parameter_overrides={"FunctionTimeout": timeout, "RegionCount": "3"})
    for name, spec in template.functions.items():
        assert spec.timeout_seconds == float(timeout), name
        env = template.environment(name, TABLE_NAMES)
        assert (env["REGION_COUNT"], env["POWERTOOLS_SERVICE_NAME"]) == ("3", "idblocks"), name
