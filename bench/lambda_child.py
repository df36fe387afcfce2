"""What bench/server.py runs in a fresh interpreter, as Lambda would start
one: ``python -S -m bench.lambda_child MODE ...`` with the function's
directory as working directory and only the standard library, the layer and
this project's root on the path. Prints the seconds measured.

    cold FUNCTION_DIR LAYER_DIR ROUTE EVENT    import the handler, serve one request
    baseline LAYER_DIR                         import boto3, create a DynamoDB client
    breakdown FUNCTION_DIR LAYER_DIR EVENT     the next function's cold start, step by step
    warm FUNCTION_DIR LAYER_DIR ROUTE EVENT CALLS [STUBS]   median seconds per warm invocation
    bare LAYER_DIR ROUTE EVENT CALLS [STUBS]   the same, for a bare handler (bare_handler)

STUBS, the DynamoDB answers the stub is given, is CALLS + 1 unless given
(bench/instructions.py gives the same to runs of different CALLS).

Each measurement starts at the first line of its function, before any import
of its own, so what it imports is in the figure; nothing is imported at
module level beyond what the interpreter has loaded before any code runs.
DynamoDB is a botocore Stubber (no network).

With BENCH_OPENTELEMETRY set to a directory holding what AWS's OpenTelemetry
layer holds (bench/opentelemetry-layer.txt), cold and warm first do what that
layer does before the runtime loads the handler (start_opentelemetry), as the
OpenTelemetryLayerArn parameter deploys it.
"""

import sys
import time

# A counter's item as DynamoDB returns it, for the admin route's read.
ITEM = {
    "name": {"S": "invoices"},
    "hwm": {"N": "41"},
    "room": {"N": "9"},
    "max_id": {"N": "50"},
    "created_at": {"S": "2026-01-01T00:00:00.000Z"},
    "updated_at": {"S": "2026-01-01T00:00:00.000Z"},
}


def stub(client, calls, route):
    """DynamoDB's answers for ``calls`` invocations: an allocation, or a counter read."""
    from botocore.stub import Stubber

    stubber = Stubber(client)
    for _ in range(calls):
        if route == "admin":
            stubber.add_response("get_item", {"Item": ITEM})
        else:
            stubber.add_response("update_item", {"Attributes": {"hwm": {"N": "141"}}})
    stubber.activate()
    return stubber


def start_opentelemetry():
    """What a function under the OpenTelemetry layer's wrapper runs before
    its handler: the layer's packages after the core's (which, loaded first,
    win where both hold one), the auto-instrumentation the wrapper starts
    (the AWS distro and its configurator, every instrumentation the wrapper's
    environment leaves enabled), then the handler (ORIG_HANDLER) wrapped by
    the aws-lambda instrumentation, with the invocation's trace header as its
    parent. Nothing without BENCH_OPENTELEMETRY."""
    import os

    layer_dir = os.environ.get("BENCH_OPENTELEMETRY")
    if not layer_dir:
        return
    sys.path.append(layer_dir)
    from opentelemetry.instrumentation.auto_instrumentation import initialize

    initialize()
    from opentelemetry.instrumentation.aws_lambda import AwsLambdaInstrumentor
    from opentelemetry.propagate import get_global_textmap

    def parent_from_lambdas_header(event):
        return get_global_textmap().extract({"X-Amzn-Trace-Id": os.environ.get("_X_AMZN_TRACE_ID", "")})

    # wraps app.lambda_handler where it is defined, importing it
    AwsLambdaInstrumentor().instrument(event_context_extractor=parent_from_lambdas_header)


def context():
    """What Lambda passes the handler."""
    from localrun.invoke import LocalContext

    return LocalContext("bench", timeout_seconds=15)


def cold(function_dir, layer_dir, route, event_path):
    started = time.perf_counter()
    import json

    sys.path[:0] = [function_dir, layer_dir]
    start_opentelemetry()
    import app

    from idblocks_core.core import core

    stub(core().store.client, 1, route)
    with open(event_path) as file:
        event = json.load(file)
    reply = app.lambda_handler(event, context())
    took = time.perf_counter() - started
    assert reply["statusCode"] == 200, reply
    print(took)


def baseline(layer_dir):
    started = time.perf_counter()
    sys.path[:0] = [layer_dir]
    import boto3

    boto3.client("dynamodb")
    print(time.perf_counter() - started)


def _import_botocore():
    import importlib

    # what the core's client is made from (the baseline imports it as part of boto3)
    importlib.import_module("botocore.session")
    importlib.import_module("botocore.client")


def _import_powertools_logging_metrics():
    import importlib

    importlib.import_module("aws_lambda_powertools.logging")
    importlib.import_module("aws_lambda_powertools.metrics")


def _create_logger_and_metrics():
    import importlib

    # the handlers' Logger and Metrics, made once (no tracer: AWS traces from outside)
    importlib.import_module("idblocks_core.observability")


def _import_router():
    import importlib

    # the HTTP edge and the field declarations (no pydantic, no router)
    importlib.import_module("idblocks_core.api.fields")


def _import_app():
    import importlib

    importlib.import_module("app")


def _create_client():
    # the core's own client, so the stub answers the handler's call (mostly
    # botocore's client creation; the settings and objects around it are cheap)
    from idblocks_core.core import core

    return core().store.client


# The steps of a cold start, in order, by the names bench/server.py reports them under.
BREAKDOWN = {
    "botocore_import": _import_botocore,
    "powertools_logging_metrics": _import_powertools_logging_metrics,
    "observability": _create_logger_and_metrics,
    "router": _import_router,
    "app_import": _import_app,
    "client_create": _create_client,
}


def breakdown(function_dir, layer_dir, event_path):
    """The seconds from the start to the end of each step, then to the end
    of the first invocation (what runs between two marks, e.g. building the
    stub, counts in the step it precedes)."""
    started = time.perf_counter()
    marks = []
    import json

    sys.path[:0] = [function_dir, layer_dir]
    client = None
    for step in BREAKDOWN.values():
        client = step() or client
        marks.append(time.perf_counter())
    stub(client, 1, "next")
    with open(event_path) as file:
        event = json.load(file)
    app = sys.modules["app"]
    assert app.lambda_handler(event, context())["statusCode"] == 200
    marks.append(time.perf_counter())
    print(*[mark - started for mark in marks])


def bare_handler(client, route):
    """What a function does at the least: the same DynamoDB call as the
    route's (an allocation's conditional ADD, or a counter's read) with a
    plain boto3 client, and the answer as JSON. No logging, tracing,
    metrics, deadline or validation: the floor the warm ratio is taken to."""
    import json

    def handler(event, context):
        key = {"name": {"S": event["pathParameters"]["name"]}}
        if route == "admin":
            item = client.get_item(TableName="counters", Key=key, ConsistentRead=True)["Item"]
            body = {"name": item["name"]["S"], "next": int(item["hwm"]["N"]) + 1}
        else:
            attributes = client.update_item(
                TableName="counters",
                Key=key,
                UpdateExpression="ADD #hwm :span, #room :minus SET #updated = :now, #token = :token",
                ConditionExpression="attribute_not_exists(#deleted) AND #room >= :span",
                ExpressionAttributeNames={
                    "#hwm": "hwm",
                    "#room": "room",
                    "#updated": "updated_at",
                    "#token": "token",
                    "#deleted": "deleted_at",
                },
                ExpressionAttributeValues={
                    ":span": {"N": "1"},
                    ":minus": {"N": "-1"},
                    ":now": {"S": "2026-01-01T00:00:00.000Z"},
                    ":token": {"S": "0" * 32},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )["Attributes"]
            body = {"counter": key["name"]["S"], "id": int(attributes["hwm"]["N"])}
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}

    return handler


def _median_call(handler, event, calls):
    import contextlib
    import io
    import statistics

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):  # metrics lines; Lambda ships them, here they are dropped
        handler(event, context())
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            reply = handler(event, context())
            times.append(time.perf_counter() - started)
            assert reply["statusCode"] == 200, reply
            sink.seek(0)
            sink.truncate()
    return statistics.median(times)


def warm(function_dir, layer_dir, route, event_path, calls, stubs=None):
    import json

    calls = int(calls)
    sys.path[:0] = [function_dir, layer_dir]
    start_opentelemetry()
    import app

    from idblocks_core.core import core

    stub(core().store.client, int(stubs or calls + 1), route)
    with open(event_path) as file:
        event = json.load(file)
    print(_median_call(app.lambda_handler, event, calls))


def bare(layer_dir, route, event_path, calls, stubs=None):
    import json

    calls = int(calls)
    sys.path[:0] = [layer_dir]
    import boto3

    client = boto3.client("dynamodb")
    stub(client, int(stubs or calls + 1), route)
    with open(event_path) as file:
        event = json.load(file)
    print(_median_call(bare_handler(client, route), event, calls))


MODES = {"cold": cold, "baseline": baseline, "breakdown": breakdown, "warm": warm, "bare": bare}

if __name__ == "__main__":
    MODES[sys.argv[1]](*sys.argv[2:])
