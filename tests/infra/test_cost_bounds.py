"""Every limit that bounds what the stack can cost is a parameter, says what
it limits, and reaches what AWS enforces, read from the deployed template
(tests/support/sam.py)."""

from __future__ import annotations

import pytest

from idblocks_core.settings import ConfigurationError, Settings
from localrun.template import Template
from tests.support.sam import translate

FUNCTIONS = {"NextFunction": "ReservedConcurrency", "BatchFunction": "ReservedConcurrency",
             "AdminFunction": "AdminReservedConcurrency"}  # fmt: skip


def test_the_throttle_parameters_say_they_limit_each_method():
    """They said "Stage-wide", but a stage's MethodSettings for /* and *
    set a limit for each method apart (8 routes, 8 times the rate). No REST
    API setting caps a stage as a whole; the description now says so."""
    parameters = Template().raw["Parameters"]
    for name in ("ThrottlingRateLimit", "ThrottlingBurstLimit"):
        description = " ".join(parameters[name]["Description"].split())
        assert "stage-wide" not in description.lower(), name
        assert "each method" in description.lower(), name
    (setting,) = next(r for r in translate()["Resources"].values() if r["Type"] == "AWS::ApiGateway::Stage")[
        "Properties"
    ]["MethodSettings"]
    assert (setting["ResourcePath"], setting["HttpMethod"]) == ("/*", "*")


@pytest.mark.parametrize(("client", "admin"), [("100", "5"), ("7", "0"), ("0", "2"), ("0", "0")])
def test_reserved_concurrency_bounds_each_function(client, admin):
    """No function had reserved concurrency: a surge or a hot counter could
    take the account's whole pool. Each function's now comes from its
    parameter; 0, the default (a new account can reserve none:
    tests/infra/test_first_deploy.py), leaves it unreserved."""
    template = Template()
    assert (template.parameters["ReservedConcurrency"], template.parameters["AdminReservedConcurrency"]) == (
        "0",
        "0",
    )
    resources = translate(ReservedConcurrency=client, AdminReservedConcurrency=admin)["Resources"]
    for function, parameter in FUNCTIONS.items():
        given = {"ReservedConcurrency": client, "AdminReservedConcurrency": admin}[parameter]
        reserved = resources[function]["Properties"].get("ReservedConcurrentExecutions")
        assert reserved == (None if given == "0" else given), function


@pytest.mark.parametrize(
    ("quota", "expected"), [("0", None), ("250000", {"Limit": "250000", "Period": "DAY"})]
)
def test_an_optional_daily_quota_per_client_key(quota, expected):
    plan = translate(ClientAuth="API_KEY", UsageQuotaPerDay=quota)["Resources"]["ClientUsagePlan"][
        "Properties"
    ]
    assert plan.get("Quota") == expected
    assert plan["Throttle"] == {"RateLimit": "500", "BurstLimit": "1000"}


def test_idempotency_records_are_kept_a_bounded_time():
    """IdempotencyTtlSeconds had no maximum: a record per keyed request,
    kept as long as anyone typed. Now at most 7 days, the range the
    functions' settings take too, so nothing the template allows is refused
    at run time."""
    spec = Template().raw["Parameters"]["IdempotencyTtlSeconds"]
    assert spec["MaxValue"] == 7 * 86400
    env = {"COUNTERS_TABLE": "c", "IDEMPOTENCY_TABLE": "i", "AUTO_CREATE_COUNTERS": "false",
           "MAX_BATCH_SIZE": "1", "ALLOW_GET_NEXT": "true", "REGION_COUNT": "1", "REGION_INDEX": "0",
           "API_STAGE": "v1"}  # fmt: skip
    for seconds in (spec["MinValue"], spec["MaxValue"]):
        assert (
            Settings.from_env(env | {"IDEMPOTENCY_TTL_SECONDS": str(seconds)}).idempotency_ttl_seconds
            == seconds
        )
    with pytest.raises(ConfigurationError, match="IDEMPOTENCY_TTL_SECONDS must be from 3600 to 604800"):
        Settings.from_env(env | {"IDEMPOTENCY_TTL_SECONDS": str(spec["MaxValue"] + 1)})


def test_an_alarm_watches_the_volume_of_refusals():
    """Nothing watched 4xx (429 throttling included): a client in a retry
    loop, or someone probing with the wrong credentials, went unseen."""
    alarm = translate(Api4xxAlarmPerMinute="120")["Resources"]["Api4xxAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/ApiGateway",
        "4XXError",
        "Sum",
    )
    assert (str(alarm["Threshold"]), alarm["Period"], alarm["ComparisonOperator"]) == (
        "120",
        60,
        "GreaterThanThreshold",
    )
