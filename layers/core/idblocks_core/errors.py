"""Domain errors. Each carries a stable machine-readable ``code``; how an error
becomes an HTTP status is decided in one place, ``idblocks_core.http``."""

from __future__ import annotations


class IdBlocksError(Exception):
    """Base of every error the service reports to a caller."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(IdBlocksError):
    """The request itself is wrong; nothing was changed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class CounterNotFound(IdBlocksError):
    code = "counter_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"counter '{name}' does not exist")
        self.name = name


class CounterDeleted(CounterNotFound):
    """A deleted counter: gone for callers, but its high-water mark is kept."""

    def __init__(self, name: str, high_water_mark: int) -> None:
        super().__init__(name)
        self.high_water_mark = high_water_mark


class Conflict(IdBlocksError):
    """The request is well formed but the counter's state forbids it."""


class CounterExists(Conflict):
    code = "counter_exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"counter '{name}' already exists")


class CounterExhausted(Conflict):
    code = "counter_exhausted"

    def __init__(self, name: str, count: int, next_id: int, max_id: int) -> None:
        left = max(0, max_id - next_id + 1)
        super().__init__(
            f"counter '{name}' cannot hand out {count} more ID(s): "
            f"next is {next_id}, max is {max_id}, {left} left"
        )


class CounterWouldMoveBack(Conflict):
    code = "counter_would_move_back"

    def __init__(self, name: str, requested: int, next_id: int) -> None:
        super().__init__(
            f"counter '{name}' can only move forward: next is {next_id}, {requested} would hand out IDs again"
        )


class NextBeyondMax(Conflict):
    code = "next_beyond_max"

    def __init__(self, name: str, requested: int, max_id: int) -> None:
        super().__init__(
            f"counter '{name}' ends at max {max_id}; next can be at most {max_id + 1}, not {requested}"
        )


class BelowHighWaterMark(Conflict):
    """Re-creating a deleted counter at or below IDs it already handed out."""

    code = "below_high_water_mark"

    def __init__(self, name: str, field: str, value: int, high_water_mark: int) -> None:
        super().__init__(
            f"counter '{name}' was deleted after handing out IDs up to {high_water_mark}; "
            f"{field} must be above {high_water_mark}, not {value}"
        )


class ServiceUnavailable(IdBlocksError):
    """DynamoDB throttled or failed after botocore's own retries."""

    code = "service_unavailable"

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class IdempotencyKeyReused(IdBlocksError):
    code = "idempotency_key_reused"

    def __init__(self) -> None:
        super().__init__(
            "this Idempotency-Key was already used for a request with a different body; "
            "use a new key for a new request"
        )


class RequestInProgress(IdBlocksError):
    code = "request_in_progress"

    def __init__(self, retry_after_seconds: int = 1) -> None:
        super().__init__("a request with this Idempotency-Key is still in progress; retry after it completes")
        self.retry_after_seconds = retry_after_seconds
