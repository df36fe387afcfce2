"""What the client raises. Every error from the service carries its HTTP
status and the service's error code and message; the few the client raises
before sending anything (a name the service would refuse, no credentials or
no region for SigV4) carry status 0 and the code the service would use.

A configuration the client cannot work with (a malformed endpoint, port or
region, an auth that is not one, a credential source that is broken) is a
ConfigurationError, raised when the backend is made, before any request; an
https:// endpoint whose server speaks plain HTTP is one too, raised at the
first request, which is what shows it."""

from __future__ import annotations


class IdBlocksError(Exception):
    """Base of everything this package raises."""


class ConfigurationError(IdBlocksError, ValueError):
    """The client was set up with something it cannot work with: a malformed
    endpoint (host, port, a query or credentials in it), a malformed region,
    an auth that is not an Auth instance, or a broken credential source.
    Raised when the backend is made, before any request; also a ValueError,
    as a bad endpoint always was. An https:// endpoint whose server answers
    in plain HTTP is raised at the first request, at once, never retried.
    The command line exits 2 for it."""


class ServiceError(IdBlocksError):
    """The service answered with an error that retrying will not fix."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" + (f" (HTTP {status})" if status else ""))
        self.status = status
        self.code = code
        self.message = message


class InvalidRequest(ServiceError):
    """400/415/422: the request itself is wrong."""


class InvalidName(InvalidRequest, ValueError):
    """A counter name the service's rule refuses, found before sending
    (status 0, code invalid_name). Also a ValueError: it is a bad argument."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "invalid_name", message)


class AuthError(ServiceError):
    """401/403: not authenticated, or not allowed; or, with status 0, SigV4
    has no credentials or no region (see the subclasses), found before sending."""


class MissingCredentials(AuthError, ConfigurationError):
    """IamAuth found no AWS credentials anywhere in botocore's chain, or a
    source that is broken (a profile that does not exist, half a key pair)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "missing_credentials", message)


class MissingRegion(AuthError, ConfigurationError):
    """IamAuth cannot tell which region to sign for."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "missing_region", message)


class CounterNotFound(ServiceError):
    """404: no such counter (and the service does not auto-create)."""


class Conflict(ServiceError):
    """409: the counter's state forbids the request (see ``code``)."""


class CounterExhausted(Conflict):
    """409 counter_exhausted: the counter has reached its max."""


# The code of a counter that moved back, from the service (HTTP 500) or found
# by a Sequence (status 0).
COUNTER_MOVED_BACK = "counter_moved_back"


class CounterMovedBack(ServiceError):
    """The counter handed out IDs it had handed out before: its stored
    state moved back (its table restored from a backup, say). The service
    answers it (HTTP 500 counter_moved_back) when a fresh allocation comes
    back at or below what the same function environment had already taken,
    and hands out nothing. A Sequence raises it (status 0, the same code)
    when a block overlaps the IDs it was given before from that counter and
    region, and hands out none of that block. Never retried: until the
    counter is above its old high-water mark again, what it hands out may
    have been handed out before."""


class ServiceUnavailable(IdBlocksError):
    """The service could not be reached, or kept answering 429/5xx, for as
    long as the retry policy allows. ``capacity_refusals`` counts the
    attempts it refused for capacity (429, 503): a counter or a service too
    busy for the load, not an endpoint that is down. ``retry_after``: the
    seconds the service's last answer asked to wait before the next try
    (its Retry-After), when it said; a Sequence does not ask again sooner.
    ``never_answered``: nothing has ever answered at the endpoint and the
    connection found nothing there (refused, or no such host): a wrong
    address or a server not started, said at once rather than retried; a
    Sequence's callers waiting for that request are told it too."""

    def __init__(
        self,
        *args: object,
        capacity_refusals: int = 0,
        retry_after: float | None = None,
        never_answered: bool = False,
    ) -> None:
        super().__init__(*args)
        self.capacity_refusals = capacity_refusals
        self.retry_after = retry_after
        self.never_answered = never_answered


class UnexpectedResponse(IdBlocksError):
    """The service answered 2xx with a body this client cannot read (not JSON,
    or without the fields the route promises). Not a ServiceError: the request
    may have been applied, so a keyed request keeps its key for another try."""


class SequenceClosed(IdBlocksError):
    """The Sequence was closed; it hands out nothing more."""


def error_for(status: int, code: str, message: str) -> ServiceError:
    if code == COUNTER_MOVED_BACK:
        return CounterMovedBack(status, code, message)
    if status in (401, 403):
        return AuthError(status, code, message)
    if status == 404:
        return CounterNotFound(status, code, message)
    if status == 409:
        cls = CounterExhausted if code == "counter_exhausted" else Conflict
        return cls(status, code, message)
    if 400 <= status < 500:
        return InvalidRequest(status, code, message)
    return ServiceError(status, code, message)


def copy_of(error: BaseException) -> BaseException:
    """A new instance of ``error``, for another caller: the same class, words
    and attributes (whatever its constructor takes: it is not called), the
    same cause, and no traceback yet, so that callers raising one error at
    once do not write their frames into one object."""
    fresh = type(error).__new__(type(error), *error.args)
    fresh.__dict__.update(error.__dict__)
    fresh.__cause__, fresh.__suppress_context__ = error.__cause__, error.__suppress_context__
    return fresh
