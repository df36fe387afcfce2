"""What the client raises. Every error from the service carries its HTTP
status and the service's error code and message; the few the client raises
before sending anything (a name the service would refuse, no credentials or
no region for SigV4) carry status 0 and the code the service would use."""

from __future__ import annotations


class IdBlocksError(Exception):
    """Base of everything this package raises."""


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


class MissingCredentials(AuthError):
    """IamAuth found no AWS credentials anywhere in botocore's chain."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "missing_credentials", message)


class MissingRegion(AuthError):
    """IamAuth cannot tell which region to sign for."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "missing_region", message)


class CounterNotFound(ServiceError):
    """404: no such counter (and the service does not auto-create)."""


class Conflict(ServiceError):
    """409: the counter's state forbids the request (see ``code``)."""


class CounterExhausted(Conflict):
    """409 counter_exhausted: the counter has reached its max."""


class ServiceUnavailable(IdBlocksError):
    """The service could not be reached, or kept answering 429/5xx, for as
    long as the retry policy allows. ``capacity_refusals`` counts the
    attempts it refused for capacity (429, 503): a counter or a service too
    busy for the load, not an endpoint that is down."""

    def __init__(self, *args: object, capacity_refusals: int = 0) -> None:
        super().__init__(*args)
        self.capacity_refusals = capacity_refusals


class UnexpectedResponse(IdBlocksError):
    """The service answered 2xx with a body this client cannot read (not JSON,
    or without the fields the route promises). Not a ServiceError: the request
    may have been applied, so a keyed request keeps its key for another try."""


class SequenceClosed(IdBlocksError):
    """The Sequence was closed; it hands out nothing more."""


def error_for(status: int, code: str, message: str) -> ServiceError:
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
