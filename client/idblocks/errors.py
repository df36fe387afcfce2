"""What the client raises. Every error from the service carries its HTTP
status and the service's error code and message."""

from __future__ import annotations


class IdBlocksError(Exception):
    """Base of everything this package raises."""


class ServiceError(IdBlocksError):
    """The service answered with an error that retrying will not fix."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message


class InvalidRequest(ServiceError):
    """400/415/422: the request itself is wrong."""


class AuthError(ServiceError):
    """401/403: not authenticated, or not allowed."""


class CounterNotFound(ServiceError):
    """404: no such counter (and the service does not auto-create)."""


class Conflict(ServiceError):
    """409: the counter's state forbids the request (see ``code``)."""


class CounterExhausted(Conflict):
    """409 counter_exhausted: the counter has reached its max."""


class ServiceUnavailable(IdBlocksError):
    """The service could not be reached, or kept answering 429/5xx, for as
    long as the retry policy allows."""


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
