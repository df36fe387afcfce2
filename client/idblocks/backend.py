"""Talking to the idblocks API over HTTP.

``HttpBackend`` covers every route. Block requests (next, batch) always carry
an Idempotency-Key, kept across the retries of one request, so a retry after
a lost response gets the block that was already taken instead of a second
one. Throttling, 502-504 and network errors are retried with jittered
backoff (RetryPolicy), and so is a 500 when repeating the request is harmless;
everything else is raised as the matching ServiceError.

Counter names are checked against the service's rule before anything is sent
(InvalidName); a 2xx whose body is not what the route promises is an
UnexpectedResponse, never a KeyError.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import uuid
import weakref
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlparse

import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError

from idblocks.errors import (
    InvalidName,
    MissingCredentials,
    MissingRegion,
    ServiceUnavailable,
    UnexpectedResponse,
    error_for,
)
from idblocks.retry import RETRY_STATUSES, SERVER_ERROR, RetryPolicy, parse_retry_after

USER_AGENT = "idblocks-client/0.1"


@dataclass(frozen=True)
class Block:
    """IDs ``start``, ``start + step``, ... up to ``end``, both included.
    ``step`` is the service's RegionCount: 1 (consecutive IDs) in a single
    region, K when K regions each hand out their own residue modulo K."""

    start: int
    end: int
    step: int = 1
    # Attempts of the request for this block that the service refused for
    # capacity (429, 503) before answering it: the counter is hot. Not part
    # of the block's identity.
    capacity_refusals: int = field(default=0, compare=False)

    def __len__(self) -> int:
        return (self.end - self.start) // self.step + 1

    def ids(self) -> range:
        return range(self.start, self.end + 1, self.step)


class Backend(Protocol):
    """What a Sequence needs: one call that hands out a block."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block: ...


# -- authentication ------------------------------------------------------------


class Auth(Protocol):
    """Headers that authenticate one request. An Auth may also have
    ``prepare(endpoint)``, which HttpBackend calls once, to refuse at
    construction what would make every request fail."""

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]: ...


class NoAuth:
    """No authentication: the dev server (`make dev`), or a stack deployed with
    ClientAuth=NONE. HttpBackend's default."""

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {}


class ApiKeyAuth:
    """ClientAuth API_KEY: the key in x-api-key."""

    def __init__(self, api_key: str) -> None:
        if not api_key:
            raise ValueError("api_key is empty")
        self._key = api_key

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"x-api-key": self._key}


NO_CREDENTIALS = (
    "no AWS credentials for SigV4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE to a profile in "
    "~/.aws/config or ~/.aws/credentials, or run where an IAM role provides them (Lambda, ECS, EC2)"
)
NO_REGION = (
    "no AWS region for SigV4: the endpoint is not an execute-api URL that names one; "
    "pass region= (idblocks --region), or set AWS_REGION, AWS_DEFAULT_REGION or the profile's region"
)


class IamAuth:
    """ClientAuth AWS_IAM (and the admin routes): SigV4 for execute-api, with
    credentials from botocore's usual chain (environment, profile, role...).

    Raises MissingCredentials at once when the chain finds none; HttpBackend
    raises MissingRegion at construction when no region is known for its
    endpoint (``region``, else the execute-api host name, else AWS_REGION,
    AWS_DEFAULT_REGION or the profile's region)."""

    def __init__(self, region: str | None = None, session: Any = None, *, lazy: bool = False) -> None:
        """``lazy``: look for credentials at the first request, not now.
        Finding them can block on the network (an instance role asks the
        metadata service); AsyncHttpBackend signs in a worker thread, so
        with ``lazy`` nothing of it runs on the event loop."""
        import botocore.session

        self._session = session or botocore.session.get_session()
        self._region = region
        if not lazy:
            self._credentials()

    def _credentials(self) -> Any:
        from botocore.exceptions import BotoCoreError

        try:
            # botocore keeps what it found; refreshable (role) credentials renew themselves
            credentials = self._session.get_credentials()
        except BotoCoreError as exc:  # e.g. AWS_PROFILE names a profile that does not exist
            raise MissingCredentials(f"{exc}; {NO_CREDENTIALS}") from None
        if credentials is None:
            raise MissingCredentials(NO_CREDENTIALS)
        return credentials

    def _region_for(self, url: str) -> str:
        # botocore itself reads AWS_DEFAULT_REGION and the profile, not AWS_REGION,
        # which Lambda and most AWS tools set
        region = (
            self._region
            or _region_of(url)
            or os.environ.get("AWS_REGION")
            or self._session.get_config_variable("region")
        )
        if not region:
            raise MissingRegion(NO_REGION)
        return region

    def prepare(self, endpoint: str) -> None:
        self._region_for(endpoint)

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._credentials()
        region = self._region_for(url)
        request = AWSRequest(
            method=method, url=url, data=body or b"", headers={"Content-Type": "application/json"}
        )
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
        return dict(request.headers.items())


def _region_of(url: str) -> str | None:
    match = re.match(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", urlparse(url).hostname or "")
    return match.group(1) if match else None


# -- the API -------------------------------------------------------------------


class HttpBackend:
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
        self.auth = auth or NoAuth()
        prepare = getattr(self.auth, "prepare", None)
        if prepare is not None:
            prepare(self.endpoint)
        self.retry = retry or RetryPolicy()
        self._pool_size, self._timeout = pool_size, timeout
        self._http = self._new_pool()
        _live_backends.add(self)

    def _new_pool(self) -> urllib3.PoolManager:
        timeout = urllib3.Timeout(connect=min(self._timeout, 5.0), read=self._timeout)
        return urllib3.PoolManager(maxsize=self._pool_size, retries=False, timeout=timeout)

    def _after_fork_in_child(self) -> None:
        # The pool's idle keep-alive connections are the parent's sockets too:
        # a child sending on one could read the parent's answer (its block)
        # and the parent the child's. The child opens its own. The inherited
        # pool is dropped, not closed: closing is the parent's business.
        self._http = self._new_pool()

    # block requests ------------------------------------------------------

    def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> Block:
        """POST /counters/{counter}/batch. Safe to call again with the same key."""
        path = batch_path(counter)
        body, refusals = self._send("POST", path, {"count": count}, idempotency_key or new_key(), True)
        return block_of(body, path, refusals)

    def next(self, counter: str, *, idempotency_key: str | None = None) -> int:
        path = f"/counters/{_name(counter)}/next"
        body = self.request("POST", path, idempotency_key=idempotency_key or new_key())
        return _int_field(body, "id", path)

    # administration ------------------------------------------------------

    def create(
        self, name: str, *, start: int | None = None, max_id: int | None = None, cache: int | None = None
    ) -> dict[str, Any]:
        """``cache``: how many IDs each service environment takes at a time
        for next (the service's default is 1, a write per ID)."""
        body: dict[str, Any] = {"name": check_name(name)}
        if start is not None:
            body["start"] = start
        if max_id is not None:
            body["max"] = max_id
        if cache is not None:
            body["cache"] = cache
        return _object(self.request("POST", "/admin/counters", body, retry_unknown_outcome=False), "create")

    def get(self, name: str) -> dict[str, Any]:
        return _object(self.request("GET", f"/admin/counters/{_name(name)}"), "get")

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        query = {k: v for k, v in (("limit", limit), ("cursor", cursor)) if v is not None}
        path = "/admin/counters" + (f"?{urlencode(query)}" if query else "")
        page = _object(self.request("GET", path), "list")
        if not isinstance(page.get("counters"), list) or not isinstance(page.get("cursor", 0), str | None):
            raise UnexpectedResponse(f"list answered without a counters list and a cursor: {_excerpt(page)}")
        return page

    def set_next(self, name: str, next_id: int) -> dict[str, Any]:
        return self.update(name, next_id=next_id)

    def update(self, name: str, *, next_id: int | None = None, cache: int | None = None) -> dict[str, Any]:
        """PUT: move next forward, change the cache setting, or both. Service
        environments holding cached blocks see it once those drain or expire."""
        body = {k: v for k, v in (("next", next_id), ("cache", cache)) if v is not None}
        if not body:
            raise ValueError("update needs next_id, cache or both")
        # Raise-only or setting a value, so repeating it is harmless.
        return _object(self.request("PUT", f"/admin/counters/{_name(name)}", body), "update")

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/admin/counters/{_name(name)}", retry_unknown_outcome=False)

    # the one place requests are made ----------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        retry_unknown_outcome: bool | None = None,
    ) -> Any:
        """Send, retrying what can be retried; return the JSON body or raise.

        A network error after the request went out, or a 500, leaves its
        outcome unknown; it is retried only when repeating is harmless:
        ``retry_unknown_outcome``, by default true for GET and PUT (reads and
        raise-only writes) and for anything with an Idempotency-Key."""
        if retry_unknown_outcome is None:
            retry_unknown_outcome = idempotency_key is not None or method in ("GET", "PUT")
        return self._send(method, path, body, idempotency_key, retry_unknown_outcome)[0]

    def _send(
        self, method: str, path: str, body: Any, idempotency_key: str | None, retry_unknown_outcome: bool
    ) -> tuple[Any, int]:
        """request(), and how many attempts were refused for capacity before
        the answer (a ServiceUnavailable carries that count too)."""
        steps = exchange(
            self.endpoint, self.retry, method, path, body, idempotency_key, retry_unknown_outcome
        )
        outcome: Reply | NoReply | None = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, Attempt):
                    outcome = self._attempt(step)
                else:
                    self.retry.sleep(step)
                    outcome = None
        except StopIteration as done:
            sent: tuple[Any, int] = done.value  # exchange's return; StopIteration.value is untyped
            return sent

    def _attempt(self, attempt: Attempt) -> Reply | NoReply:
        try:
            signed = {**attempt.headers, **self.auth.headers(attempt.method, attempt.url, attempt.data)}
            response = self._http.request(
                attempt.method, attempt.url, body=attempt.data, headers=signed, redirect=False
            )
        except (NewConnectionError, ConnectTimeoutError) as exc:
            return NoReply(cannot_connect(self.endpoint, exc), exc, sent=False)
        except HTTPError as exc:
            return NoReply(f"{type(exc).__name__} talking to {self.endpoint}: {exc}", exc, sent=True)
        return Reply(response.status, response.data, response.headers.get("Retry-After"))

    def close(self) -> None:
        self._http.clear()


# Every HttpBackend in the process, so that a forked child can give each one
# connections of its own (urllib3 does nothing on fork).
_live_backends: weakref.WeakSet[HttpBackend] = weakref.WeakSet()


def _backends_after_fork_in_child() -> None:
    for backend in list(_live_backends):
        backend._after_fork_in_child()


os.register_at_fork(after_in_child=_backends_after_fork_in_child)


# -- one request and its retries, for HttpBackend and AsyncHttpBackend alike ----------


@dataclass(frozen=True)
class Attempt:
    """Put this on the network once (signed by the driver: SigV4 dates each attempt)."""

    method: str
    url: str
    data: bytes | None
    headers: dict[str, str]


@dataclass(frozen=True)
class Reply:
    """What came back for an attempt."""

    status: int
    data: bytes
    retry_after: str | None


@dataclass(frozen=True)
class NoReply:
    """An attempt that got no answer: never ``sent`` (it cannot have been
    applied), or sent and then lost (it may have been)."""

    message: str
    error: BaseException
    sent: bool


def exchange(
    endpoint: str,
    policy: RetryPolicy,
    method: str,
    path: str,
    body: Any,
    idempotency_key: str | None,
    retry_unknown_outcome: bool,
) -> Generator[Attempt | float, Reply | NoReply | None, tuple[Any, int]]:
    """The whole life of one request, without its I/O: yields an Attempt to
    put on the network (the driver sends back its Reply or NoReply) or a
    number of seconds to wait before the next; returns the JSON body and how
    many attempts were refused for capacity, or raises what the client
    raises. HttpBackend drives it with urllib3 and time.sleep, and
    AsyncHttpBackend with httpx and asyncio.sleep, so that what is retried,
    with which key, and which error a caller hears, are decided here once."""
    url = endpoint + path
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    started = policy.clock()
    failure = "no attempt made"
    server_errors = 0
    refusals = 0
    for attempt in range(policy.attempts):
        retry_after = None
        outcome = yield Attempt(method, url, data, headers)
        if isinstance(outcome, NoReply):
            failure = outcome.message  # never sent: always safe to retry
            if outcome.sent and not retry_unknown_outcome:
                raise ServiceUnavailable(
                    failure + " (the request may have been applied)", capacity_refusals=refusals
                ) from outcome.error
        elif isinstance(outcome, Reply):
            if outcome.status < 300:
                return _json_of(outcome, method, path), refusals
            code, message = _error_of(outcome)
            if _capacity_refusal(outcome.status, code):
                refusals += 1
            if outcome.status == SERVER_ERROR and retry_unknown_outcome:
                server_errors += 1
                if server_errors == policy.server_error_attempts:
                    raise ServiceUnavailable(
                        f"{method} {path} answered {code}: {message} (HTTP 500) {server_errors} times"
                        + (" (the request may have been applied)" if method == "POST" else ""),
                        capacity_refusals=refusals,
                    )
            elif not _retryable(outcome.status, code):
                raise error_for(outcome.status, code, message)
            failure = f"{code}: {message} (HTTP {outcome.status})"
            retry_after = parse_retry_after(outcome.retry_after, policy.now())
        if attempt + 1 == policy.attempts:
            break
        wait = policy.delay(attempt + 1, retry_after)
        if policy.clock() - started + wait > policy.deadline:
            if retry_after is not None and retry_after == wait:
                failure += f"; asked to retry after {wait:g} s, past the {policy.deadline:g} s deadline"
            break
        yield wait
    raise ServiceUnavailable(
        f"{method} {path} failed after {attempt + 1} attempt(s): {failure}", capacity_refusals=refusals
    )


def endpoint_of(endpoint: str) -> str:
    """The API's base URL, checked, without a trailing slash."""
    url = urlparse(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"endpoint must be an http(s) URL, not {endpoint!r}")
    return endpoint.rstrip("/")


def batch_path(counter: str) -> str:
    return f"/counters/{_name(counter)}/batch"


def block_of(body: Any, path: str, refusals: int) -> Block:
    """The block a batch request was answered, checked."""
    start, end = _int_field(body, "start", path), _int_field(body, "end", path)
    # A service from before regions existed sends no step: its blocks are consecutive.
    step = _int_field(body, "step", path) if "step" in body else 1
    if end < start:
        raise UnexpectedResponse(f"POST {path} answered the empty block [{start}, {end}]")
    if step < 1 or (end - start) % step:
        raise UnexpectedResponse(
            f"POST {path} answered a block [{start}, {end}] that step {step} does not fit"
        )
    return Block(start, end, step, capacity_refusals=refusals)


def cannot_connect(endpoint: str, exc: Exception) -> str:
    """Where the connection was tried and why it failed; on this machine, the
    likely cause: the dev server is not running."""
    # urllib3 words it "<connection object at 0x...>: Failed to establish ...".
    reason = str(exc).split(">: ", 1)[-1]
    message = f"cannot connect to {endpoint} ({reason})"
    host = urlparse(endpoint).hostname or ""
    if _is_loopback(host):
        message += "; nothing is listening there: is the dev server running? (`make dev` starts it)"
    return message


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _retryable(status: int, code: str) -> bool:
    # 409 request_in_progress: the same request (same Idempotency-Key) is still
    # running; asking again soon gets its answer.
    return status in RETRY_STATUSES or (status == 409 and code == "request_in_progress")


def _capacity_refusal(status: int, code: str) -> bool:
    # Throttled (by the stage or the account), or the service's own answer
    # when the counter's item refused the write: too much load for the
    # capacity, which a longer runway eases. A 502/504 or an API Gateway 503
    # without the service's code says nothing about load.
    return status == 429 or (status == 503 and code == "service_unavailable")


def new_key() -> str:
    return uuid.uuid4().hex


# The service's counter name rule (NAME_PATTERN in the service's rules.py),
# repeated here so that a name it refuses is refused before anything is sent:
# "." and ".." above all, which URL handling would collapse into another path
# (/counters/./batch is /counters/batch).
_NAME_RE = re.compile(
    r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,126}|\.\.[A-Za-z0-9_.-]{1,126})"
)


def check_name(name: object) -> str:
    """Return ``name`` if the service accepts it as a counter name: 1-128
    characters of A-Z a-z 0-9 _ . -, and not "." or "..". Else raise
    InvalidName (an InvalidRequest and a ValueError)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidName(
            f"counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', "
            f"and not '.' or '..', not {name!r}"
        )
    return name


def _name(name: str) -> str:
    return quote(check_name(name), safe="")


def _excerpt(data: Any) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else repr(data)
    return text[:120] + ("..." if len(text) > 120 else "")


def _json_of(response: Any, method: str, path: str) -> Any:
    if not response.data:
        return None
    try:
        return json.loads(response.data)
    except ValueError:
        raise UnexpectedResponse(
            f"{method} {path} answered HTTP {response.status} with a body that is not JSON: "
            f"{_excerpt(response.data)}"
        ) from None


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise UnexpectedResponse(f"{what} answered {_excerpt(body)}, not a JSON object")
    return body


def _int_field(body: Any, field: str, path: str) -> int:
    value = body.get(field) if isinstance(body, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnexpectedResponse(f"POST {path} answered without an integer '{field}': {_excerpt(body)}")
    return value


def _error_of(response: Any) -> tuple[str, str]:
    try:
        body = json.loads(response.data)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return str(error.get("code", "error")), str(error.get("message", ""))
    # API Gateway's own errors (auth, throttling, unknown route) look like {"message": "..."}
    message = body.get("message") if isinstance(body, dict) else None
    return f"http_{response.status}", str(message or response.data[:200].decode(errors="replace"))
