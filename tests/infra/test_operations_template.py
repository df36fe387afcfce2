"""What an operator gets from the stack, read from the template as the SAM
transform hands it to CloudFormation: a log group per function that expires
and is kept like the counters, the saved queries over the allocation
records, and a dashboard whose metrics are the ones the code emits."""

from __future__ import annotations

import json
import re

import pytest

from idblocks_core.logic.allocation import ALLOCATION_RECORD
from localrun.template import STACK
from tests.support.metrics import dashboard_text, emf_metrics, take_ids_every_way
from tests.support.restore import refuse_on_both_routes
from tests.support.sam import translate

FUNCTIONS = {"NextFunction": "next", "BatchFunction": "batch", "AdminFunction": "admin"}


def _text(value) -> str:
    """A string property as written (plain, or the template of its Fn::Sub)."""
    if isinstance(value, dict) and set(value) == {"Fn::Sub"}:
        return value["Fn::Sub"]
    assert isinstance(value, str), value
    return value


def _of_type(cfn, resource_type):
    return {k: r for k, r in cfn["Resources"].items() if r["Type"] == resource_type}


# -- log groups ---------------------------------------------------------------


def test_every_function_logs_to_a_declared_group_of_its_own():
    """Each function (after the transform: every AWS::Lambda::Function) is
    pointed at a log group the stack declares, one group per function, each
    named by CloudFormation (tests/infra/test_first_deploy.py says why)."""
    cfn = translate()
    functions = _of_type(cfn, "AWS::Lambda::Function")
    assert set(functions) == set(FUNCTIONS)
    groups = _of_type(cfn, "AWS::Logs::LogGroup")
    pointed = [function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] for function in functions.values()]
    assert sorted(pointed) == sorted(groups)
    assert {logical_id.removesuffix("Function") for logical_id in functions} == {
        group.removesuffix("LogGroup") for group in pointed
    }


@pytest.mark.parametrize(("overrides", "days"), [({}, 365), ({"LogRetentionDays": "30"}, 30)])
def test_logs_expire_after_the_retention_parameter_a_year_by_default(overrides, days):
    groups = _of_type(translate(**overrides), "AWS::Logs::LogGroup").values()
    assert [int(group["Properties"]["RetentionInDays"]) for group in groups] == [days] * len(FUNCTIONS)


def test_log_groups_are_kept_as_the_counters_table_is_save_by_a_failed_create():
    """Kept when the stack is deleted or a group replaced, as the table is;
    a failed first create deletes them, where it keeps the table
    (tests/infra/test_first_deploy.py)."""
    cfn = translate()
    table = cfn["Resources"]["CountersTable"]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    for group in _of_type(cfn, "AWS::Logs::LogGroup").values():
        assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")


# -- saved queries ------------------------------------------------------------


@pytest.fixture
def allocation_record(api, logged) -> dict:
    """One allocation record, as a function writes it."""
    assert api.call("batch", name="orders", body={"count": 3}).status == 200
    [record] = [r for r in logged() if r["message"] == ALLOCATION_RECORD]
    return record


def _queries(cfn) -> dict[str, dict]:
    return {k: r["Properties"] for k, r in _of_type(cfn, "AWS::Logs::QueryDefinition").items()}


def _query_fields(query: str) -> set[str]:
    """The record fields a query names (comments and quoted values aside)."""
    code = "\n".join(line for line in query.splitlines() if not line.lstrip().startswith("#"))
    code = re.sub(r'"[^"]*"', "", code)
    results = set(re.findall(r"\bas (\w+)", code))  # names the query gives its results
    words = set(re.findall(r"`?([A-Za-z_@][A-Za-z0-9_]*)`?", code))
    keywords = {"fields", "filter", "and", "or", "not", "sort", "asc", "desc", "stats", "sum", "count"}
    keywords |= {"as", "by", "limit", "message"}
    return {w for w in words if not w.startswith("@") and w not in keywords | results}


def test_the_saved_queries_read_the_allocation_records_of_next_and_batch(allocation_record):
    queries = _queries(translate())
    assert set(queries) == {"WhoTookIdQuery", "TopTakersQuery"}
    for query in queries.values():
        groups = {ref["Ref"] for ref in query["LogGroupNames"]}
        assert groups == {"NextLogGroup", "BatchLogGroup"}
        text = query["QueryString"]
        assert f'message = "{ALLOCATION_RECORD}"' in text
        # Every field a query names is one the record carries (or the
        # Logger's correlation id, API Gateway's request id).
        assert _query_fields(text) <= set(allocation_record), _query_fields(text) - set(allocation_record)


def test_who_took_an_id_matches_the_block_that_holds_it(allocation_record):
    """The first query's condition, applied to the record of block 1..3
    (step 1): it holds IDs 1, 2 and 3, and not 4."""
    text = _queries(translate())["WhoTookIdQuery"]["QueryString"]
    assert "first_id <= 42 and last_id >= 42 and (42 - first_id) % step = 0" in text
    record = allocation_record
    holds = [
        record["first_id"] <= x <= record["last_id"] and (x - record["first_id"]) % record["step"] == 0
        for x in range(0, 6)
    ]
    assert holds == [False, True, True, True, False, False]


def test_top_takers_sums_the_ids_of_fresh_records(allocation_record):
    text = _queries(translate())["TopTakersQuery"]["QueryString"]
    assert 'served_from != "idempotency_record"' in text
    assert "stats sum(`count`) as ids" in text
    assert "by caller, counter, route" in text


# -- dashboard ----------------------------------------------------------------


def _dashboard(cfn) -> dict:
    return json.loads(dashboard_text(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))


def _metric_lines(dashboard) -> list[tuple[str, str, dict[str, str], str]]:
    """(namespace, metric, dimensions, stat) of every metric the dashboard plots."""
    found = []
    for widget in dashboard["widgets"]:
        for line in widget["properties"].get("metrics", []):
            *names, options = line
            namespace, metric, *pairs = names
            found.append(
                (namespace, metric, dict(zip(pairs[::2], pairs[1::2], strict=True)), options["stat"])
            )
    return found


def test_the_dashboards_own_metrics_are_what_the_allocations_emit(api, dynamodb, capsys):
    """Every way of taking IDs run once (batch, next uncached, next from a
    cache, its block), and of being refused one from a counter that moved
    back: each metric of the service's namespace on the dashboard is one the
    code emitted with those dimensions, and every metric the code emitted is
    on the dashboard."""
    capsys.readouterr()
    take_ids_every_way(api)
    refuse_on_both_routes(api, dynamodb, "restored")
    emitted = emf_metrics(capsys.readouterr().out.splitlines())

    cfn = translate()
    namespace = cfn["Resources"]["NextFunction"]["Properties"]["Environment"]["Variables"][
        "POWERTOOLS_METRICS_NAMESPACE"
    ]
    plotted = {
        (ns, metric, tuple(sorted(dimensions.items())))
        for ns, metric, dimensions, _ in _metric_lines(_dashboard(cfn))
        if ns == namespace
    }
    assert plotted <= emitted, plotted - emitted
    assert {metric for _, metric, _ in emitted} == {metric for _, metric, _ in plotted}


def test_the_dashboard_reads_this_stacks_functions_tables_and_api():
    cfn = translate(StageName="prod")
    lines = _metric_lines(_dashboard(cfn))
    by_namespace: dict[str, list] = {}
    for namespace, metric, dimensions, stat in lines:
        by_namespace.setdefault(namespace, []).append((metric, dimensions, stat))
    assert {d["FunctionName"] for _, d, _ in by_namespace["AWS/Lambda"]} == {
        "${NextFunction}",
        "${BatchFunction}",
        "${AdminFunction}",
    }
    assert {m for m, _, _ in by_namespace["AWS/Lambda"]} >= {"ConcurrentExecutions", "Duration", "Errors"}
    assert {d["TableName"] for _, d, _ in by_namespace["AWS/DynamoDB"]} == {
        "${CountersTableName}",
        "${IdempotencyTable}",
    }
    assert ("WriteThrottleEvents", {"TableName": "${CountersTableName}"}, "Sum") in by_namespace[
        "AWS/DynamoDB"
    ]
    # The counters table by the name the functions use: the one the stack creates.
    body = cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert body[1] == {"CountersTableName": {"Ref": "CountersTable"}}
    api_lines = by_namespace["AWS/ApiGateway"]
    # The API's metrics are named as the alarms name them: the stack, the stage.
    assert {tuple(sorted(d.items())) for _, d, _ in api_lines} == {
        (("ApiName", STACK.name), ("Stage", "prod"))
    }
    assert {(m, s) for m, _, s in api_lines} >= {
        ("4XXError", "Sum"),
        ("5XXError", "Sum"),
        ("Latency", "p50"),
        ("Latency", "p99"),
    }
    # Every ${...} the body names is something the template defines, or its own variable.
    text = dashboard_text(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"])
    names = set(re.findall(r"\$\{([^}]+)\}", text))
    assert names <= set(cfn["Resources"]) | set(body[1]), names - set(cfn["Resources"])


def test_the_dashboards_log_widget_reads_the_allocation_records():
    [widget] = [w for w in _dashboard(translate())["widgets"] if w["type"] == "log"]
    query = widget["properties"]["query"]
    assert "SOURCE '${NextLogGroup}' | SOURCE '${BatchLogGroup}'" in query
    assert f'message = "{ALLOCATION_RECORD}"' in query


def test_the_dashboards_url_is_an_output():
    output = translate()["Outputs"]["DashboardUrl"]["Value"]
    assert "#dashboards/dashboard/${Dashboard}" in _text(output)


def test_the_operating_docs_show_the_saved_queries_as_the_stack_saves_them():
    from localrun.template import ROOT

    readme = (ROOT / "docs" / "deploy.md").read_text()
    blocks: list[str] = []
    block: list[str] | None = None  # the lines of the fenced block we are in, if any
    for line in readme.splitlines():
        if line.startswith("```") and block is None:
            block = []
        elif line.startswith("```"):
            blocks.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
    # The Logs Insights queries (a filter-log-events pattern says $.message instead).
    blocks = [b for b in blocks if 'filter message = "allocation"' in b]

    def code(text: str) -> list[str]:
        return [line for line in text.strip().splitlines() if not line.lstrip().startswith("#")]

    saved = [code(query["QueryString"]) for query in _queries(translate()).values()]
    assert sorted(code(block) for block in blocks) == sorted(saved)
