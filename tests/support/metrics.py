"""The CloudWatch metrics the functions emit, and the custom metrics a
stack's alarms and dashboard read, each as CloudWatch names a metric: its
namespace, its name and its dimensions (a metric is all three: the same
name under other dimensions is another metric).

The functions emit through Powertools, which prints an EMF line per flush
and reads its namespace and service (the ``service`` dimension) from the
environment once, at import: a stack of another name is run in a fresh
interpreter of its own (``emitted_in``; ``python -m tests.support.metrics
NAME`` is that interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from localrun.environment import scrubbed_environment
from localrun.template import ROOT, Stack

# (namespace, metric name, ((dimension, value), ...) sorted)
Metric = tuple[str, str, tuple[tuple[str, str], ...]]


def emf_metrics(lines: Iterable[str]) -> set[Metric]:
    """Every metric the EMF lines among ``lines`` emit, under each of their
    dimension sets; other lines (the Logger's) are passed over."""
    found = set()
    for line in lines:
        if not (line.startswith("{") and '"_aws"' in line):
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                dimensions = tuple(sorted((name, document[name]) for name in dimension_set))
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], dimensions))
    return found


def take_ids_every_way(api: Any) -> None:
    """Every way of taking IDs, once: batch, next uncached, next from a
    cache and the block that fills it. A cached counter's first block in an
    environment is one ID: the third call is served from the second block."""
    assert api.call("batch", name="orders", body={"count": 5}).status == 200
    assert api.call("next-post", name="orders").status == 200
    assert api.call("admin-create", body={"name": "members", "cache": 10, "max": 1000}).status == 201
    assert [api.call("next-post", name="members").status for _ in range(3)] == [200, 200, 200]


def start_emitting(stack: Stack) -> subprocess.Popen[str]:
    """A fresh interpreter taking IDs every way as ``stack``'s functions
    (its environment from template.yaml read in that stack), on moto's
    in-process DynamoDB; ``emitted`` reads what it printed."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.metrics", stack.name, stack.region, stack.account_id],
        cwd=ROOT,
        env=scrubbed_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def emitted(run: subprocess.Popen[str]) -> set[Metric]:
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    return emf_metrics(out.splitlines())


def emitted_in(stack: Stack) -> set[Metric]:
    return emitted(start_emitting(stack))


# -- what a stack reads -----------------------------------------------------------------


def _custom(namespace: Any) -> bool:
    """A namespace of the stack's own: AWS's services publish under AWS/..."""
    return not (isinstance(namespace, str) and namespace.startswith("AWS/"))


def _metric(namespace: Any, name: Any, dimensions: dict[str, Any], where: str) -> Metric:
    values = (namespace, name, *dimensions.values())
    # A custom metric is named by literals once the stack's values are in:
    # a reference or a ${...} left would be resolved by CloudFormation into
    # something this reading cannot compare.
    assert all(isinstance(v, str) and "${" not in v for v in values), (where, values)
    return namespace, name, tuple(sorted(dimensions.items()))


def _alarm_metrics(logical_id: str, alarm: dict[str, Any]) -> list[Metric]:
    if "MetricName" in alarm:
        specs = [alarm]
    else:
        specs = [query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query]
    return [
        _metric(
            spec["Namespace"],
            spec["MetricName"],
            {d["Name"]: d["Value"] for d in spec.get("Dimensions", [])},
            logical_id,
        )
        for spec in specs
        if _custom(spec["Namespace"])
    ]


def dashboard_text(body: Any) -> str:
    """The dashboard's JSON, as the template writes it (an Fn::Sub's text)."""
    if isinstance(body, dict):
        body = body["Fn::Sub"]
    return body[0] if isinstance(body, list) else body


def read_by(cfn: dict[str, Any]) -> dict[str, set[Metric]]:
    """What reads a custom metric (each alarm, each dashboard widget) -> the
    custom metrics it reads: those of a namespace of the stack's own, not
    AWS/..."""
    found: dict[str, set[Metric]] = {}
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            found[logical_id] = set(_alarm_metrics(logical_id, resource["Properties"]))
        elif resource["Type"] == "AWS::CloudWatch::Dashboard":
            widgets = json.loads(dashboard_text(resource["Properties"]["DashboardBody"]))["widgets"]
            for number, widget in enumerate(widgets):
                where = f"{logical_id} widget {number}: {widget['properties'].get('title')}"
                metrics = found.setdefault(where, set())
                for line in widget["properties"].get("metrics", []):
                    namespace, name, *pairs = line[:-1] if isinstance(line[-1], dict) else line
                    if _custom(namespace):
                        dimensions = dict(zip(pairs[::2], pairs[1::2], strict=True))
                        metrics.add(_metric(namespace, name, dimensions, where))
    return found


def main(argv: list[str]) -> None:
    """Take IDs every way as the functions of the stack ``argv`` names
    (name, region, account), and be refused by a counter that moved back,
    printing their output: EMF lines and logs."""
    import os

    name, region, account = argv
    stack = Stack(name=name, region=region, account_id=account)

    from localrun.environment import FAKE_AWS
    from localrun.tables import TABLE_NAMES, create_tables
    from localrun.template import Template

    template = Template(stack=stack)
    # As in Lambda: the environment is in place before any handler is imported.
    os.environ.update(template.environment("NextFunction", TABLE_NAMES) | FAKE_AWS)

    import boto3
    from moto import mock_aws

    from tests.support.api import LocalApi
    from tests.support.restore import refuse_on_both_routes

    with mock_aws():
        create_tables(boto3.client("dynamodb"), template, TABLE_NAMES)
        api = LocalApi(template)
        take_ids_every_way(api)
        refuse_on_both_routes(api, boto3.client("dynamodb"), "restored")


if __name__ == "__main__":
    main(sys.argv[1:])
