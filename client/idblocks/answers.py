"""Reading what the service answered: the JSON body of a success, checked
against what the route promises (a 2xx that is not is an
UnexpectedResponse, never a KeyError), and the code and message of an error."""

from __future__ import annotations

import json
from typing import Any

from idblocks.block import Block
from idblocks.errors import UnexpectedResponse


def excerpt(data: Any) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else repr(data)
    return text[:120] + ("..." if len(text) > 120 else "")


def json_of(data: bytes, status: int, method: str, path: str) -> Any:
    """A success's body: None when empty, else its JSON."""
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        raise UnexpectedResponse(
            f"{method} {path} answered HTTP {status} with a body that is not JSON: {excerpt(data)}"
        ) from None


def error_of(data: bytes, status: int) -> tuple[str, str]:
    """An error's code and message: the service's {"error": {"code", "message"}},
    or API Gateway's own {"message": ...} (auth, throttling, unknown route)."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return str(error.get("code", "error")), str(error.get("message", ""))
    message = body.get("message") if isinstance(body, dict) else None
    return f"http_{status}", str(message or data[:200].decode(errors="replace"))


def object_of(what: str) -> Any:
    """A reader of an answer that must be a JSON object (the admin routes')."""

    def read(body: Any, refusals: int) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise UnexpectedResponse(f"{what} answered {excerpt(body)}, not a JSON object")
        return body

    return read


def page_of(body: Any, refusals: int) -> dict[str, Any]:
    """A page of the counters list: a JSON object with a counters list and a cursor."""
    page: dict[str, Any] = object_of("list")(body, refusals)
    if not isinstance(page.get("counters"), list) or not isinstance(page.get("cursor", 0), str | None):
        raise UnexpectedResponse(f"list answered without a counters list and a cursor: {excerpt(page)}")
    return page


def int_field(body: Any, field: str, path: str) -> int:
    value = body.get(field) if isinstance(body, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnexpectedResponse(f"POST {path} answered without an integer '{field}': {excerpt(body)}")
    return value


def block_of(body: Any, path: str, refusals: int) -> Block:
    """The block a batch request was answered, checked."""
    start, end = int_field(body, "start", path), int_field(body, "end", path)
    # A service from before regions existed sends no step: its blocks are consecutive.
    step = int_field(body, "step", path) if "step" in body else 1
    if end < start:
        raise UnexpectedResponse(f"POST {path} answered the empty block [{start}, {end}]")
    if step < 1 or (end - start) % step:
        raise UnexpectedResponse(
            f"POST {path} answered a block [{start}, {end}] that step {step} does not fit"
        )
    return Block(start, end, step, capacity_refusals=refusals)
