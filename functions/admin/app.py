"""/admin/counters: create, list, read, move forward and delete counters.
Always behind AWS_IAM (see template.yaml)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from idblocks_core.api import resolver as http
from idblocks_core.api.schemas import CounterPage, CounterState, CreateCounterRequest, SetNextRequest
from idblocks_core.core import core, invocation_deadline
from idblocks_core.domain.rules import LIST_LIMIT_MAX
from idblocks_core.observability import logger, tracer

app = http.new_resolver()
CREATE_ERRORS = ("invalid_name", "invalid_start", "invalid_max", "counter_exists", "below_high_water_mark")
SET_CONFLICTS = ("counter_would_move_back", "region_mismatch", "next_beyond_max")
SET_ERRORS = ("invalid_name", "invalid_next", "invalid_cache", "counter_not_found", *SET_CONFLICTS)


@app.post(
    "/admin/counters",
    summary="Create a counter",
    responses=http.documented(201, CounterState, *CREATE_ERRORS, "invalid_cache", *http.BODY_ERRORS),
    security=http.ADMIN_SECURITY,
)
def create_counter(request: CreateCounterRequest) -> Response[CounterState]:
    counter = core().admin.create(request.name, request.start, request.max, request.cache)
    return http.json_response(201, CounterState(**counter.as_dict()))


@app.get(
    "/admin/counters",
    summary="List counters, a page at a time",
    responses=http.documented(200, CounterPage, "invalid_limit", "invalid_cursor"),
    security=http.ADMIN_SECURITY,
)
def list_counters(
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX, description="Page size.")] = 100,
    cursor: Annotated[str | None, Query(max_length=512, description="From the previous page.")] = None,
) -> Response[CounterPage]:
    counters, next_cursor = core().admin.list(limit, cursor)
    page = CounterPage(counters=[CounterState(**c.as_dict()) for c in counters], cursor=next_cursor)
    return http.json_response(200, page)


@app.get(
    "/admin/counters/<name>",
    summary="Read a counter",
    responses=http.documented(200, CounterState, "invalid_name", "counter_not_found"),
    security=http.ADMIN_SECURITY,
)
def get_counter(name: http.CounterName) -> Response[CounterState]:
    return http.json_response(200, CounterState(**core().admin.get(name).as_dict()))


@app.put(
    "/admin/counters/<name>",
    summary="Move a counter forward (never back), change its cache setting, or both",
    responses=http.documented(200, CounterState, *SET_ERRORS, *http.BODY_ERRORS),
    security=http.ADMIN_SECURITY,
)
def set_next(name: http.CounterName, request: SetNextRequest) -> Response[CounterState]:
    counter = core().admin.update(name, next_id=request.next, cache=request.cache)
    return http.json_response(200, CounterState(**counter.as_dict()))


@app.delete(
    "/admin/counters/<name>",
    summary="Delete a counter; its high-water mark is kept",
    responses=http.documented(204, None, "invalid_name", "counter_not_found"),
    security=http.ADMIN_SECURITY,
)
def delete_counter(name: http.CounterName) -> Response[None]:
    core().admin.delete(name)
    return http.json_response(204, None)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    with invocation_deadline(context):
        return http.resolve(app, event, context)
