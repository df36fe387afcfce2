"""/admin/counters: create, list, read, move forward and delete counters.
Always behind AWS_IAM (see template.yaml)."""

from aws_lambda_powertools.logging import correlation_paths

from idblocks_core.api import resolver as http
from idblocks_core.api.fields import CURSOR, LIMIT, NAME
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import logger, tracer

app = http.Api()
CREATE_ERRORS = ("invalid_name", "invalid_start", "invalid_max", "counter_exists", "below_high_water_mark")
SET_CONFLICTS = ("counter_would_move_back", "region_mismatch", "next_beyond_max")
SET_ERRORS = ("invalid_name", "invalid_next", "invalid_cache", "counter_not_found", *SET_CONFLICTS)


@app.route(
    "/admin/counters",
    ("POST",),
    summary="Create a counter",
    responses=(201, "CounterState", *CREATE_ERRORS, "invalid_cache", *http.BODY_ERRORS),
    security=http.ADMIN_SECURITY,
    body="CreateCounterRequest",
)
def create_counter(request: http.Request) -> dict:
    counter = core().admin.create(request["name"], request["start"], request["max"], request["cache"])
    return http.json_response(201, counter.as_dict())


@app.route(
    "/admin/counters",
    ("GET",),
    summary="List counters, a page at a time",
    responses=(200, "CounterPage", "invalid_limit", "invalid_cursor"),
    security=http.ADMIN_SECURITY,
    params=(LIMIT, CURSOR),
)
def list_counters(request: http.Request) -> dict:
    counters, next_cursor = core().admin.list(request["limit"], request["cursor"])
    return http.json_response(200, {"counters": [c.as_dict() for c in counters], "cursor": next_cursor})


@app.route(
    "/admin/counters/<name>",
    ("GET",),
    summary="Read a counter",
    responses=(200, "CounterState", "invalid_name", "counter_not_found"),
    security=http.ADMIN_SECURITY,
    params=(NAME,),
)
def get_counter(request: http.Request) -> dict:
    return http.json_response(200, core().admin.get(request["name"]).as_dict())


@app.route(
    "/admin/counters/<name>",
    ("PUT",),
    summary="Move a counter forward (never back), change its cache setting, or both",
    responses=(200, "CounterState", *SET_ERRORS, *http.BODY_ERRORS),
    security=http.ADMIN_SECURITY,
    params=(NAME,),
    body="SetNextRequest",
)
def set_next(request: http.Request) -> dict:
    counter = core().admin.update(request["name"], next_id=request["next"], cache=request["cache"])
    return http.json_response(200, counter.as_dict())


@app.route(
    "/admin/counters/<name>",
    ("DELETE",),
    summary="Delete a counter; its high-water mark is kept",
    responses=(204, None, "invalid_name", "counter_not_found"),
    security=http.ADMIN_SECURITY,
    params=(NAME,),
)
def delete_counter(request: http.Request) -> dict:
    core().admin.delete(request["name"])
    return http.json_response(204, None)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
def lambda_handler(event: dict, context) -> dict:
    with invocation_deadline(context):
        return http.resolve(app, event, context)
