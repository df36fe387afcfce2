"""/admin/counters: create, list, read, move forward and delete counters.
Always behind AWS_IAM (see template.yaml)."""

from typing import Any

from idblocks_core.api import fields as f
from idblocks_core.api import gateway as http
from idblocks_core.core import core, invocation_deadline
from idblocks_core.observability import lambda_entry

routes = http.Routes()
ADMIN = {"security": http.ADMIN_SECURITY, "tag": "admin"}
BY_NAME = "/admin/counters/{name}"
CONFLICTS = ("counter_would_move_back", "region_mismatch", "next_beyond_max")


@routes.route(
    "POST",
    "/admin/counters",
    summary="Create a counter",
    fields=(f.NEW_NAME, f.START, f.MAX, f.CACHE),
    body="CreateCounterRequest",
    answers=(201, "CounterState", "counter_exists", "below_high_water_mark"),
    **ADMIN,
)
def create_counter(request: http.Request) -> dict[str, Any]:
    counter = core().admin.create(request["name"], request["start"], request["max"], request["cache"])
    return http.json_response(201, counter.as_dict())


@routes.route(
    "GET",
    "/admin/counters",
    summary="List counters, a page at a time (deleted ones too, with deleted=true)",
    fields=(f.LIMIT, f.CURSOR, f.LIST_DELETED),
    answers=(200, "CounterPage"),
    **ADMIN,
)
def list_counters(request: http.Request) -> dict[str, Any]:
    counters, next_cursor = core().admin.list(request["limit"], request["cursor"], request["deleted"])
    page: dict[str, Any] = {"counters": [c.as_dict() for c in counters], "cursor": next_cursor}
    return http.json_response(200, page | ({"deleted": True} if request["deleted"] is True else {}))


@routes.route(
    "GET",
    BY_NAME,
    summary="Read a counter",
    fields=(f.NAME,),
    answers=(200, "CounterState", "counter_not_found"),
    **ADMIN,
)
def get_counter(request: http.Request) -> dict[str, Any]:
    return http.json_response(200, core().admin.get(request["name"]).as_dict())


@routes.route(
    "PUT",
    BY_NAME,
    summary="Move a counter forward (never back) or change its cache setting; or a deleted one's mark",
    fields=(f.NAME, f.NEXT, f.CACHE, f.SET_DELETED),
    body="UpdateCounterRequest",
    one_of=("next", "cache"),
    answers=(200, "CounterState", "counter_not_found", *CONFLICTS),
    **ADMIN,
)
def update_counter(request: http.Request) -> dict[str, Any]:
    admin, name = core().admin, request["name"]
    counter = admin.update(name, next_id=request["next"], cache=request["cache"], deleted=request["deleted"])
    return http.json_response(200, counter.as_dict())


@routes.route(
    "DELETE",
    BY_NAME,
    summary="Delete a counter; its high-water mark is kept",
    fields=(f.NAME,),
    answers=(204, None, "counter_not_found"),
    **ADMIN,
)
def delete_counter(request: http.Request) -> dict[str, Any]:
    core().admin.delete(request["name"])
    return http.json_response(204, None)


@lambda_entry(flushes_metrics=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    with invocation_deadline(context):
        return http.resolve(routes, event, context)
