"""The operator's alarms, read from what CloudFormation deploys: each watches
a metric that exists under the names this stack and its code give it."""

from __future__ import annotations

import re

import pytest

from localrun.template import STACK
from tests.support.metrics import emf_metrics
from tests.support.restore import refuse_on_both_routes
from tests.support.sam import translate

ALARMS = {
    "CountersThrottleAlarm",
    "Api4xxAlarm",
    "Api5xxAlarm",
    "FunctionErrorsAlarm",
    "ApiLatencyAlarm",
    "CounterLowAlarm",
    "CounterMovedBackAlarm",
}
TOPIC = "arn:aws:sns:us-east-1:123456789012:idblocks-alarms"


def _alarms(cfn):
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in cfn["Resources"].items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    }


def _stats(alarm):
    """(namespace, metric, dimensions) of every metric an alarm reads."""
    if "MetricName" in alarm:
        found = [(alarm["Namespace"], alarm["MetricName"], alarm["Dimensions"])]
    else:
        found = [
            (stat["Metric"]["Namespace"], stat["Metric"]["MetricName"], stat["Metric"]["Dimensions"])
            for stat in (query["MetricStat"] for query in alarm["Metrics"] if "MetricStat" in query)
        ]
    return [(namespace, name, {d["Name"]: d["Value"] for d in dims}) for namespace, name, dims in found]


def test_the_stack_has_the_operators_alarms():
    assert set(_alarms(translate())) == ALARMS


def test_throttling_is_watched_on_the_counters_table():
    [(namespace, metric, dimensions)] = _stats(_alarms(translate())["CountersThrottleAlarm"])
    assert (namespace, metric, dimensions) == (
        "AWS/DynamoDB",
        "WriteThrottleEvents",
        {"TableName": {"Ref": "CountersTable"}},
    )


def test_api_alarms_name_the_api_as_sam_names_it():
    """The API Gateway metrics' ApiName dimension is the REST API's name,
    which SAM takes from the definition's title: the stack name."""
    cfn = translate(StageName="prod")
    assert cfn["Resources"]["Api"]["Properties"]["Body"]["info"]["title"] == {"Ref": "AWS::StackName"}
    alarms = _alarms(cfn)
    for logical_id, metric in (
        ("Api4xxAlarm", "4XXError"),
        ("Api5xxAlarm", "5XXError"),
        ("ApiLatencyAlarm", "Latency"),
    ):
        [(namespace, name, dimensions)] = _stats(alarms[logical_id])
        assert (namespace, name) == ("AWS/ApiGateway", metric)
        assert dimensions == {"ApiName": STACK.name, "Stage": "prod"}
    assert alarms["ApiLatencyAlarm"]["ExtendedStatistic"] == "p99"


def test_function_errors_cover_every_function():
    stats = _stats(_alarms(translate())["FunctionErrorsAlarm"])
    assert {(namespace, name) for namespace, name, _ in stats} == {("AWS/Lambda", "Errors")}
    functions = {dimensions["FunctionName"]["Ref"] for _, _, dimensions in stats}
    assert functions == {"NextFunction", "BatchFunction", "AdminFunction"}


def test_counter_low_reads_the_metric_the_allocations_emit():
    """Namespace, name and dimensions as the functions emit them (Powertools:
    its namespace and service variables, and the route dimension), with no
    per-counter dimension; the threshold is the parameter."""
    cfn = translate(CounterLowPercent="25")
    alarm = _alarms(cfn)["CounterLowAlarm"]
    variables = cfn["Resources"]["NextFunction"]["Properties"]["Environment"]["Variables"]
    stats = _stats(alarm)
    assert {(namespace, name) for namespace, name, _ in stats} == {
        (variables["POWERTOOLS_METRICS_NAMESPACE"], "CounterRangeLeftPercent")
    }
    # The service is the stack's name (Globals, as written: a Ref CloudFormation resolves).
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    assert [dimensions for _, _, dimensions in stats] == [
        {"service": STACK.name, "route": route} for route in ("next", "batch")
    ]
    assert str(alarm["Threshold"]) == "25"
    assert alarm["ComparisonOperator"] == "LessThanThreshold"


def state_after(alarm, minutes: list[dict[str, float]]) -> str:
    """The state CloudWatch gives ``alarm`` after the last of ``minutes``,
    each the datapoints of its metrics (by query id) in one period; a metric
    without a datapoint in a minute is left out. Only what the stack's
    expression alarms use is read: SUM or MIN over an array (which has a
    datapoint when any member has one), M of the last N periods, and how
    missing data is treated."""
    (returned,) = [query for query in alarm["Metrics"] if query.get("ReturnData", True)]
    found = re.fullmatch(r"(SUM|MIN)\(\[([\w, ]+)\]\)", returned["Expression"])
    assert found, returned["Expression"]
    function, members = {"SUM": sum, "MIN": min}[found[1]], [m.strip() for m in found[2].split(",")]
    above = {"GreaterThanThreshold": lambda v, t: v > t, "LessThanThreshold": lambda v, t: v < t}
    compare = above[alarm["ComparisonOperator"]]
    evaluated = minutes[-int(alarm["EvaluationPeriods"]) :]
    values = [[minute[m] for m in members if m in minute] for minute in evaluated]
    breaching = [compare(function(v), float(alarm["Threshold"])) for v in values if v]
    missing = alarm.get("TreatMissingData", "missing")
    assert missing == "notBreaching", f"say here how {missing} is treated"
    breaching += [False] * (len(values) - len(breaching))
    return (
        "ALARM" if sum(breaching) >= int(alarm.get("DatapointsToAlarm", alarm["EvaluationPeriods"])) else "OK"
    )


def test_counter_moved_back_reads_the_metric_each_routes_refusal_emits(api, dynamodb, capsys):
    """The refusals of batch and next, each once: every metric the code
    emitted for them is one the alarm reads, namespace, name and dimensions."""
    capsys.readouterr()
    refuse_on_both_routes(api, dynamodb, "orders")
    emitted = [
        (namespace, name, dict(dimensions))
        for namespace, name, dimensions in emf_metrics(capsys.readouterr().out.splitlines())
        if name == "CounterMovedBack"
    ]
    read = _stats(_alarms(translate())["CounterMovedBackAlarm"])
    assert len(emitted) == len(read) == 2
    assert all(stat in read for stat in emitted)


@pytest.mark.parametrize(
    ("minutes", "state"),
    [
        ([{}, {}, {}], "OK"),
        ([{}, {}, {"batchMovedBack": 1}], "ALARM"),
        ([{}, {"nextMovedBack": 0}, {"nextMovedBack": 1}], "ALARM"),
        ([{"nextMovedBack": 3}, {}], "OK"),
    ],
    ids=["quiet", "one-batch-refusal", "one-next-refusal", "a-minute-after"],
)
def test_counter_moved_back_fires_on_the_first_refusal_and_clears_the_minute_after(minutes, state):
    alarm = _alarms(translate())["CounterMovedBackAlarm"]
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            assert (query["MetricStat"]["Stat"], query["MetricStat"]["Period"]) == ("Sum", 60)
    assert state_after(alarm, minutes) == state


@pytest.mark.parametrize(("topic", "actions"), [("", None), (TOPIC, [TOPIC])])
def test_alarms_notify_the_topic_only_when_one_is_given(topic, actions):
    alarms = _alarms(translate(AlarmTopicArn=topic))
    assert set(alarms) == ALARMS
    for alarm in alarms.values():
        assert alarm.get("AlarmActions") == actions
        assert alarm.get("OKActions") == actions


def test_each_alarm_points_at_a_page_and_section_that_exist():
    """The descriptions said "See README, Alarms", a section that had moved
    to docs/deploy.md: an operator reading an alarm found nothing there."""
    from localrun.template import ROOT

    for logical_id, alarm in _alarms(translate()).items():
        found = re.search(r"See (\S+?)(?:, ([^.]+))?\.$", alarm["AlarmDescription"])
        assert found, logical_id
        page, section = found.groups()
        assert (ROOT / page).is_file(), (logical_id, page)
        if section:
            headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(), flags=re.MULTILINE)
            assert section in headings, (logical_id, page, section)
