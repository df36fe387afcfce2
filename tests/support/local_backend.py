"""The client's operations (idblocks.operations), answered in-process by the
functions themselves: each attempt the exchange makes becomes the API
Gateway event of its route (tests.support.api.LocalApi), and the function's
answer comes back as the HTTP reply would. What the client does with an
answer (reading it, raising the service's error) is its own code, as over
HTTP; only the network is left out, and no retry waits."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from idblocks.exchange import Attempt, Call, Reply, exchange
from idblocks.operations import Operations
from tests.support.api import LocalApi

_ROUTES = {
    ("GET", False): "admin-list",
    ("POST", False): "admin-create",
    ("GET", True): "admin-get",
    ("PUT", True): "admin-set",
    ("DELETE", True): "admin-delete",
}


class LocalBackend(Operations[Any, Any, dict[str, Any], None]):
    """The admin operations over ``api``: list, create, get, set_next, update, delete."""

    def __init__(self, api: LocalApi) -> None:
        self.api = api
        self.requests: list[tuple[str, str]] = []
        super().__init__("http://functions.invalid")

    def _open(self) -> None:
        pass

    def _perform(self, call: Call[Any]) -> Any:
        steps = exchange(self.endpoint, self.retry, call, self.contact)
        outcome: Reply | None = None
        try:
            while True:
                step = steps.send(outcome)
                outcome = self._answer(step) if isinstance(step, Attempt) else None
        except StopIteration as done:
            return done.value

    def _answer(self, attempt: Attempt) -> Reply:
        url = urlsplit(attempt.url)
        path = url.path
        self.requests.append((attempt.method, path + (f"?{url.query}" if url.query else "")))
        named = path.startswith("/admin/counters/")
        event = _ROUTES[(attempt.method, named)]
        options: dict[str, Any] = {"query": dict(parse_qsl(url.query)) or None}
        if named:
            options["name"] = unquote(path.removeprefix("/admin/counters/"))
        options["raw_body"] = attempt.data.decode() if attempt.data is not None else None
        reply = self.api.call(event, **options)
        body = cast(str | None, reply.raw.get("body"))
        return Reply(reply.status, (body or "").encode(), reply.headers.get("Retry-After"))
