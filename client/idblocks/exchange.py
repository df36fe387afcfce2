"""One request's whole life, without its I/O: the attempts, which failures
are retried and after how long, and which error a caller hears. HttpBackend
drives it with urllib3 and time.sleep, AsyncHttpBackend with httpx and
asyncio.sleep; what is retried, with which Idempotency-Key, is decided here
once.

Block requests (next, batch) always carry an Idempotency-Key, kept across
the retries of one request, so a retry after a lost response gets the block
that was already taken instead of a second one. Throttling, 502-504 and
network errors are retried with jittered backoff (RetryPolicy), and so is a
500 when repeating the request is harmless; everything else is raised as
the matching ServiceError. A request begun before the process was restored
from a snapshot (Lambda SnapStart) is not sent after it (idblocks.snapstart):
no attempt starts once a restore has come, and each Attempt carries when its
request began, which the driver's transport checks last before it writes
(a request can wait across a snapshot while it is signed, or while its
connection is made).

Until anything has answered at the endpoint (Contact), a connection refused
or a host name that does not resolve is a wrong address or a server not
started: waiting cures neither, so the request is tried only
RetryPolicy.first_contact_attempts times (once, by default) and the caller
hears where the connection failed at once. Once the endpoint has answered,
the same failures are an outage, retried as any network error. An https://
endpoint whose server answers in plain HTTP (the dev server) is a wrong
scheme, never an outage: a ConfigurationError at the first attempt, saying
the http:// URL to use."""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
import ssl
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlparse, urlsplit

from idblocks import snapstart
from idblocks.answers import error_of, json_of
from idblocks.errors import COUNTER_MOVED_BACK, ConfigurationError, ServiceUnavailable, error_for
from idblocks.retry import RETRY_STATUSES, SERVER_ERROR, RetryPolicy, parse_retry_after

# The package's version (client/pyproject.toml), written out rather than read
# from the installed metadata at import; tests/infra/test_release.py holds
# the two together.
USER_AGENT = "idblocks-client/1.0.0"

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request as an operation makes it, and how its answer is read
    (``read(body, capacity_refusals)``). ``retry_unknown_outcome``: whether a
    network error after sending, or a 500, may be retried (repeating it is
    harmless: a read, a raise-only write, anything with an Idempotency-Key)."""

    method: str
    path: str
    read: Callable[[Any, int], T]
    body: Any = None
    idempotency_key: str | None = None
    retry_unknown_outcome: bool = False


@dataclass(frozen=True)
class Attempt:
    """Put this on the network once (signed by the driver: SigV4 dates each
    attempt), unless the process was restored from a snapshot since
    ``begun`` (idblocks.snapstart.restores when the request began): the
    driver's transport checks that last before writing, and answers a
    NoReply, never sent, if it was."""

    method: str
    url: str
    data: bytes | None
    headers: dict[str, str]
    begun: int


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


@dataclass
class Contact:
    """What a backend knows of its endpoint: whether anything has answered
    there yet (any HTTP answer, an error included). Set by the exchange."""

    answered: bool = False


Steps = Generator[Attempt | float, Reply | NoReply | None, T]


def exchange(endpoint: str, policy: RetryPolicy, call: Call[T], contact: Contact) -> Steps[T]:
    """Yields an Attempt to put on the network (the driver sends back its
    Reply or NoReply) or a number of seconds to wait before the next;
    returns the answer as ``call`` reads it, or raises what the client
    raises: a ServiceError, or ServiceUnavailable once the policy gives up
    (with the capacity refusals met, and the service's last Retry-After).
    ``contact``: the endpoint's, shared by every request to it."""
    method, path = call.method, call.path
    data = json.dumps(call.body).encode() if call.body is not None else None
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if call.idempotency_key is not None:
        headers["Idempotency-Key"] = call.idempotency_key
    started = policy.clock()
    failure = "no attempt made"
    server_errors = refusals = unreached = 0
    retry_after = None
    begun = snapstart.began()
    not_sent = f"{method} {path} was begun before a restore from a snapshot; it is not sent again"
    for attempt in range(policy.attempts):
        if snapstart.restored_since(begun):
            # Every environment restored from the snapshot it was begun in
            # would send it: each would be answered the same block.
            raise ServiceUnavailable(not_sent, capacity_refusals=refusals)
        retry_after = None
        outcome = yield Attempt(method, endpoint + path, data, headers, begun)
        if isinstance(outcome, NoReply):
            if answered_in_plain_http(outcome.error):
                raise ConfigurationError(f"{method} {path}: {plain_http(endpoint)}") from outcome.error
            if isinstance(outcome.error, snapstart.RestoredSinceBegun):
                # Restored while it was being signed or connected: the
                # transport stopped it before its first byte.
                raise ServiceUnavailable(not_sent, capacity_refusals=refusals) from outcome.error
            failure = outcome.message  # never sent: always safe to retry
            if outcome.sent and not call.retry_unknown_outcome:
                raise ServiceUnavailable(
                    failure + " (the request may have been applied)", capacity_refusals=refusals
                ) from outcome.error
            if not outcome.sent and not contact.answered and nothing_there(outcome.error):
                unreached += 1
                if unreached >= policy.first_contact_attempts:
                    raise ServiceUnavailable(
                        f"{method} {path} failed after {attempt + 1} attempt(s) to an address that has never"
                        f" answered: {failure}",
                        capacity_refusals=refusals,
                        never_answered=True,
                    ) from outcome.error
        elif isinstance(outcome, Reply):
            contact.answered = True
            if outcome.status < 300:
                return call.read(json_of(outcome.data, outcome.status, method, path), refusals)
            code, message = error_of(outcome.data, outcome.status)
            if capacity_refusal(outcome.status, code):
                refusals += 1
            # A counter that moved back answers the same to every try: told at once.
            if outcome.status == SERVER_ERROR and call.retry_unknown_outcome and code != COUNTER_MOVED_BACK:
                server_errors += 1
                if server_errors == policy.server_error_attempts:
                    raise ServiceUnavailable(
                        f"{method} {path} answered {code}: {message} (HTTP 500) {server_errors} times"
                        + (" (the request may have been applied)" if method == "POST" else ""),
                        capacity_refusals=refusals,
                    )
            elif not retryable(outcome.status, code):
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
        f"{method} {path} failed after {attempt + 1} attempt(s): {failure}",
        capacity_refusals=refusals,
        retry_after=retry_after,
    )


def retryable(status: int, code: str) -> bool:
    # 409 request_in_progress: the same request (same Idempotency-Key) is still
    # running; asking again soon gets its answer.
    return status in RETRY_STATUSES or (status == 409 and code == "request_in_progress")


def capacity_refusal(status: int, code: str) -> bool:
    # Throttled (by the stage or the account), or the service's own answer
    # when the counter's item refused the write: too much load for the
    # capacity, which a longer runway eases. A 502/504 or an API Gateway 503
    # without the service's code says nothing about load.
    return status == 429 or (status == 503 and code == "service_unavailable")


def new_key() -> str:
    return uuid.uuid4().hex


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


# getaddrinfo's "this name has no address" (EAI_NODATA is not on every
# platform); EAI_AGAIN, a resolver that did not answer, may pass.
_NO_SUCH_HOST = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps (what urllib3 and httpx raise wraps the
    socket's or the TLS layer's error, as its cause)."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain of causes, never a cycle
        if seen is None:
            break
        yield seen
        seen = seen.__cause__ or seen.__context__


def nothing_there(error: BaseException) -> bool:
    """Whether a connection failed because nothing is there: refused, or a
    host name that does not resolve."""
    for seen in _causes(error):
        if isinstance(seen, socket.gaierror):
            return seen.errno in _NO_SUCH_HOST
        if isinstance(seen, ConnectionRefusedError) or getattr(seen, "errno", None) == errno.ECONNREFUSED:
            return True
    return False


def answered_in_plain_http(error: BaseException) -> bool:
    """Whether a TLS handshake failed because the server answered in plain
    HTTP: OpenSSL reads the answer's first bytes ("HTTP/1.x ...") as a
    record of no TLS version, WRONG_VERSION_NUMBER."""
    return any(
        isinstance(seen, ssl.SSLError) and seen.reason == "WRONG_VERSION_NUMBER" for seen in _causes(error)
    )


def plain_http(endpoint: str) -> str:
    """What to tell the caller of an https:// ``endpoint`` whose server
    speaks plain HTTP: the http:// URL of the same port (443 when the
    endpoint names none, where the server answered)."""
    url = urlsplit(endpoint)
    netloc = url.netloc if url.port is not None else f"{url.netloc}:443"
    instead = url._replace(scheme="http", netloc=netloc).geturl()
    return f"the server at {endpoint} answered in plain HTTP, not TLS: use {instead}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
