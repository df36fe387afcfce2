"""Every operation of the API, once, for HttpBackend and AsyncHttpBackend
alike: one core that knows no transport, and two thin drivers that send
(httpx's shape). The core checks the set-up (endpoint, auth, timeout) when a
backend is made, and turns each operation into a Call: the request, whether
repeating it is harmless, and how its answer is read. A driver sends a Call
as its exchange says (idblocks.exchange) and returns the answer, or, for
AsyncHttpBackend, an awaitable of it."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar, cast

from idblocks.answers import block_of, int_field, object_of, page_of
from idblocks.auth import Auth, checked_auth
from idblocks.errors import ConfigurationError
from idblocks.exchange import Call, Contact, new_key
from idblocks.retry import RetryPolicy
from idblocks.routes import admin_path, check_name, counter_path, endpoint_of

# What each kind of operation answers: the answer itself (HttpBackend), or an
# awaitable of it (AsyncHttpBackend).
BlockAnswer = TypeVar("BlockAnswer")  # allocate: a Block
IdAnswer = TypeVar("IdAnswer")  # next: an int
ObjectAnswer = TypeVar("ObjectAnswer")  # the admin routes: a JSON object
NoAnswer = TypeVar("NoAnswer")  # delete: None


def _nothing(body: Any, refusals: int) -> None:
    return None


def _body(body: Any, refusals: int) -> Any:
    return body


class Operations(ABC, Generic[BlockAnswer, IdAnswer, ObjectAnswer, NoAnswer]):
    """The API's operations over one endpoint. ``auth``: NoAuth() (the
    default), ApiKeyAuth(key) or IamAuth(). ``timeout``: seconds for each
    attempt's answer (a connection is given at most 5). ``retry``: the
    RetryPolicy of every request. ``pool_size``: connections kept open.
    Whatever would make every request fail (a malformed endpoint or region,
    an auth that is not one) raises ConfigurationError here, before any
    request."""

    def __init__(
        self,
        endpoint: str,
        *,
        auth: Auth | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        pool_size: int = 10,
    ) -> None:
        self.endpoint = endpoint_of(endpoint)
        self.auth = checked_auth(auth)
        prepare = getattr(self.auth, "prepare", None)
        if prepare is not None:
            prepare(self.endpoint)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigurationError(f"pool_size must be a positive integer, not {pool_size!r}")
        self.timeout, self.pool_size = float(timeout), pool_size
        self.retry = retry or RetryPolicy()
        self.contact = Contact()  # whether anything has answered at the endpoint yet
        self._open()

    @abstractmethod
    def _open(self) -> None:
        """The driver's own set-up (no connection needs to be opened yet)."""

    @abstractmethod
    def _perform(self, call: Call[Any]) -> Any:
        """Send ``call``, retried as its exchange says, and return its answer
        as the call reads it (or an awaitable of it)."""

    # block requests --------------------------------------------------------------

    def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> BlockAnswer:
        """POST /counters/{counter}/batch: a Block of ``count`` IDs. Safe to
        call again with the same key."""
        path = counter_path(counter, "batch")
        key = idempotency_key or new_key()

        def block(body: Any, refusals: int) -> Any:
            return block_of(body, path, refusals)

        return cast(BlockAnswer, self._perform(Call("POST", path, block, {"count": count}, key, True)))

    def next(self, counter: str, *, idempotency_key: str | None = None) -> IdAnswer:
        """POST /counters/{counter}/next: one ID. Safe to call again with the same key."""
        path = counter_path(counter, "next")

        def one_id(body: Any, refusals: int) -> int:
            return int_field(body, "id", path)

        key = idempotency_key or new_key()
        return cast(IdAnswer, self._perform(Call("POST", path, one_id, None, key, True)))

    # administration ----------------------------------------------------------------

    def create(
        self, name: str, *, start: int | None = None, max_id: int | None = None, cache: int | None = None
    ) -> ObjectAnswer:
        """POST /admin/counters: create a counter. ``cache``: how many IDs
        each service environment takes at a time for next (the service's
        default is 1, a write per ID). Not repeated when its outcome is unknown."""
        body: dict[str, Any] = {"name": check_name(name)}
        for field, value in (("start", start), ("max", max_id), ("cache", cache)):
            if value is not None:
                body[field] = value
        return self._object(Call("POST", admin_path(), object_of("create"), body))

    def get(self, name: str) -> ObjectAnswer:
        """GET /admin/counters/{name}: the counter's state."""
        return self._object(Call("GET", admin_path(name), object_of("get"), retry_unknown_outcome=True))

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, deleted: bool = False
    ) -> ObjectAnswer:
        """GET /admin/counters: a page of counters, and the next page's cursor (None at the end).
        ``deleted``: deleted counters too, each with ``"deleted": true`` and the mark it keeps."""
        path = admin_path(limit=limit, cursor=cursor, deleted="true" if deleted else None)
        return self._object(Call("GET", path, page_of, retry_unknown_outcome=True))

    def set_next(self, name: str, next_id: int, *, deleted: bool = False) -> ObjectAnswer:
        """PUT /admin/counters/{name}: move next forward (update with next_id only).
        ``deleted``: of a deleted counter too, raising the mark it keeps."""
        return self.update(name, next_id=next_id, deleted=deleted)

    def update(
        self, name: str, *, next_id: int | None = None, cache: int | None = None, deleted: bool = False
    ) -> ObjectAnswer:
        """PUT /admin/counters/{name}: move next forward, change the cache
        setting, or both. Service environments holding cached blocks see it
        once those drain or expire. ``deleted`` (with next_id alone): a
        deleted counter's kept mark is raised too, and it stays deleted."""
        body: dict[str, Any] = {k: v for k, v in (("next", next_id), ("cache", cache)) if v is not None}
        if not body:
            raise ValueError("update needs next_id, cache or both")
        if deleted:
            body["deleted"] = True
        # Raise-only or setting a value, so repeating it is harmless.
        call = Call("PUT", admin_path(name), object_of("update"), body, retry_unknown_outcome=True)
        return self._object(call)

    def delete(self, name: str) -> NoAnswer:
        """DELETE /admin/counters/{name}: delete a counter (its high-water
        mark is kept). Not repeated when its outcome is unknown."""
        return cast(NoAnswer, self._perform(Call("DELETE", admin_path(name), _nothing)))

    def _object(self, call: Call[dict[str, Any]]) -> ObjectAnswer:
        return cast(ObjectAnswer, self._perform(call))

    # any request ---------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        retry_unknown_outcome: bool | None = None,
    ) -> Any:
        """Any route: send, retrying what can be retried; return the JSON
        body (or an awaitable of it) or raise.

        A network error after the request went out, or a 500, leaves its
        outcome unknown; it is retried only when repeating is harmless:
        ``retry_unknown_outcome``, by default true for GET and PUT (reads and
        raise-only writes) and for anything with an Idempotency-Key."""
        if retry_unknown_outcome is None:
            retry_unknown_outcome = idempotency_key is not None or method in ("GET", "PUT")
        return self._perform(Call(method, path, _body, body, idempotency_key, retry_unknown_outcome))
