"""DynamoDB calls as the core makes them: the one module of the layer that
imports botocore. Every DynamoDB call the core makes goes through here, the
counter store's (dal/counter_store.py) and the Idempotency utility's
(through RetryingClient):

- the client, built by botocore alone, once per container (``new_dynamodb_client``);
- the invocation's deadline (``deadline``), which every attempt keeps to;
- retries and backoff (``call_dynamodb``), and the count of attempts that
  went unanswered, which the store turns into a possible-gap log line;
- the time a request spends in DynamoDB (``timed_calls``, ``DynamoDbTime``);
- what a failure is to the caller (``domain_error``), and a refused
  condition, which is no failure (``conditional_update``).
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import botocore
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from idblocks_core.domain.errors import ServiceUnavailable, StoreFailure

# What bounds a request is the invocation's deadline, not a count of retries.
# A keyed request makes three DynamoDB calls, five when it creates the
# counter, and each may be retried; an attempt starts only if it can end
# before the cut-off (the deadline less RESPONSE_MARGIN_SECONDS), its read
# timeout is cut to fit, and a backoff that would leave no time for the next
# attempt is not slept. Whatever DynamoDB does, the request ends before the
# function's Timeout: with an answer, or a 503 once the time ran out.
# botocore makes one attempt per call; call_dynamodb does the retrying, so
# that no sleep of botocore's (its backoff, a server's x-amz-retry-after)
# can run past the deadline.
CONNECT_TIMEOUT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 1.0
# Bounds the load a struggling table gets from one call, not its duration.
MAX_ATTEMPTS = 4
# A read timeout shorter than this is not worth an attempt.
MIN_READ_TIMEOUT_SECONDS = 0.2
_SHORTEST_ATTEMPT_SECONDS = CONNECT_TIMEOUT_SECONDS + MIN_READ_TIMEOUT_SECONDS
# Kept free at the end of an invocation, for what follows the last call.
RESPONSE_MARGIN_SECONDS = 0.5
# Backoff before retry n (1-based): up to BACKOFF_BASE * 2^(n-1) seconds,
# full jitter; 25 ms as botocore's standard mode uses for DynamoDB errors.
BACKOFF_BASE_SECONDS = 0.025
# Throttling means the item (or table) is past its write rate, which does
# not pass in milliseconds; waiting for it here holds a function environment
# (concurrency, billed time) while the caller could wait for free. So a
# throttled call is tried at most THROTTLED_ATTEMPTS times, after one short
# backoff, then the request is answered 503 with Retry-After and the client
# backs off (its RetryPolicy). Under a sustained hot key a request then holds
# its environment for a few DynamoDB round trips, not for seconds
# (bench/scale.py measures what that does to concurrency).
THROTTLED_ATTEMPTS = 2
THROTTLING_BACKOFF_BASE_SECONDS = 0.05
BOTO_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},
    connect_timeout=CONNECT_TIMEOUT_SECONDS,
    read_timeout=READ_TIMEOUT_SECONDS,
    tcp_keepalive=True,
    # botocore checks each request against the service model before sending
    # it: about a tenth of a warm request, for requests whose shape only the
    # counter store decides (a caller's values are checked by the domain rules
    # first). The test suites turn the check on (tests/conftest.py), so every
    # request shape the store sends is checked there; DynamoDB checks again.
    parameter_validation=False,
    # botocore rebuilds its default User-Agent, about forty sanitised parts,
    # for every request: a sixth of a warm request here (docs/performance.md).
    # A fixed one is joined once; DynamoDB's logs (CloudTrail's userAgent)
    # still name the service and botocore's version.
    user_agent=f"idblocks botocore/{botocore.__version__}",
)

_THROTTLING_CODES = frozenset(
    {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"}
)
_RETRYABLE_CODES = _THROTTLING_CODES | {
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
}
# Jitter only: a generator without state of its own, so containers restored
# from one snapshot do not all back off in step.
_JITTER = random.SystemRandom()


def new_dynamodb_client() -> Any:
    """A client for the core (build_core makes one per container). The
    endpoint follows the SDKs' standard configuration (AWS_ENDPOINT_URL_DYNAMODB
    for local runs). Every call on it, the Idempotency utility's included,
    keeps to the deadline of the invocation it runs in.

    Made by botocore, which does all of a client's work, without importing
    boto3 on top of it: boto3 adds resources and S3 transfers this code never
    uses, and its import was about 20 ms of every cold start."""
    client = botocore.session.Session().create_client("dynamodb", config=BOTO_CONFIG)
    client.meta.events.register("before-send.dynamodb", _fit_attempt_to_deadline)
    return client


# -- the invocation's deadline ---------------------------------------------------

# time.monotonic() by which the current invocation is to stop calling DynamoDB;
# None outside an invocation (scripts, tests of the core), where MAX_ATTEMPTS
# alone bounds a call.
_CUTOFF: ContextVar[float | None] = ContextVar("dynamodb_cutoff", default=None)


class DeadlineExceeded(BotoCoreError):
    """The invocation has no time left for another DynamoDB attempt. Not a
    transient error, to botocore or to call_dynamodb: it ends the call."""

    fmt = "no time left for another DynamoDB attempt before the function's timeout"


@contextlib.contextmanager
def deadline(lambda_context: Any) -> Iterator[None]:
    """Within this block, DynamoDB calls end before ``lambda_context``'s
    remaining time runs out (less RESPONSE_MARGIN_SECONDS)."""
    remaining = getattr(lambda_context, "get_remaining_time_in_millis", None)
    cutoff = None
    if remaining is not None:
        cutoff = time.monotonic() + remaining() / 1000 - RESPONSE_MARGIN_SECONDS
    token = _CUTOFF.set(cutoff)
    try:
        yield
    finally:
        _CUTOFF.reset(token)


def seconds_left() -> float | None:
    """Seconds until the current invocation's cut-off; None outside one."""
    cutoff = _CUTOFF.get()
    return None if cutoff is None else cutoff - time.monotonic()


def _fit_attempt_to_deadline(request: Any, **_: Any) -> None:
    """botocore's before-send hook: shorten the read timeout of an attempt to
    what is left before the cut-off, or refuse the attempt (DeadlineExceeded,
    which botocore does not retry) when too little is left."""
    left = seconds_left()
    if left is None:
        return
    usable = left - CONNECT_TIMEOUT_SECONDS
    if usable < MIN_READ_TIMEOUT_SECONDS:
        raise DeadlineExceeded()
    request.context["read_timeout"] = min(READ_TIMEOUT_SECONDS, usable)


def _transient(exc: Exception) -> bool:
    if isinstance(exc, ClientError):
        return _error_code(exc) in _RETRYABLE_CODES
    # Timeouts, refused and dropped connections, as botocore's standard mode sees them.
    return isinstance(exc, BotoConnectionError | HTTPClientError)


def _backoff(throttled: bool, retry: int) -> float:
    base = THROTTLING_BACKOFF_BASE_SECONDS if throttled else BACKOFF_BASE_SECONDS
    return _JITTER.uniform(0, base * 2 ** (retry - 1))


def _throttled(exc: Exception) -> bool:
    return isinstance(exc, ClientError) and _error_code(exc) in _THROTTLING_CODES


# How many attempts this context sent that may have been applied, though
# no answer said so: a timeout, a dropped connection or a 5xx (a throttled
# attempt was refused, so it is not one). Only ever grows; a caller compares
# it before and after a call (_noting_gaps).
_UNANSWERED: ContextVar[int] = ContextVar("unanswered_attempts", default=0)


def call_dynamodb(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    """One DynamoDB call, retried on throttling (THROTTLED_ATTEMPTS in all),
    5xx and connection errors (MAX_ATTEMPTS) while time is left. Raises the
    last error otherwise."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            response: dict[str, Any] = getattr(client, operation)(**kwargs)  # the client is untyped
            return response
        except (ClientError, BotoCoreError) as exc:
            throttled = _throttled(exc)
            attempts = THROTTLED_ATTEMPTS if throttled else MAX_ATTEMPTS
            if not _transient(exc) or attempt >= attempts:
                raise
            if not throttled:
                _UNANSWERED.set(_UNANSWERED.get() + 1)
            delay = _backoff(throttled, attempt)
            left = seconds_left()
            if left is not None and left - delay < _SHORTEST_ATTEMPT_SECONDS:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


# -- the time a request spends in DynamoDB ---------------------------------------


@dataclass
class DynamoDbTime:
    """The DynamoDB calls made within one ``timed_calls`` block: how many,
    and how long they took, retries and their backoff included."""

    calls: int = 0
    seconds: float = 0.0

    @property
    def milliseconds(self) -> float:
        return round(self.seconds * 1000, 3)


# The block the current request's calls are added to; None outside one.
_SPENT: ContextVar[DynamoDbTime | None] = ContextVar("dynamodb_time", default=None)


@contextlib.contextmanager
def timed_calls() -> Iterator[DynamoDbTime]:
    """Within this block, every DynamoDB call the core makes (the store's
    and the Idempotency utility's) adds its time to what it yields."""
    spent = DynamoDbTime()
    token = _SPENT.set(spent)
    try:
        yield spent
    finally:
        _SPENT.reset(token)


def timed_call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    """call_dynamodb, counted in the enclosing timed_calls block, if any,
    whether it answers or raises."""
    spent = _SPENT.get()
    if spent is None:
        return call_dynamodb(client, operation, **kwargs)
    started = time.perf_counter()
    try:
        return call_dynamodb(client, operation, **kwargs)
    finally:
        spent.calls += 1
        spent.seconds += time.perf_counter() - started


class RetryingClient:
    """A client as the Idempotency utility gets it: every operation goes
    through call_dynamodb, so its calls keep to the deadline, are retried
    like the store's own and count in the request's DynamoDB time."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("_") or not callable(attribute):
            return attribute
        return functools.partial(timed_call, self._client, name)


def domain_error(exc: ClientError | BotoCoreError) -> ServiceUnavailable | StoreFailure:
    """What a DynamoDB failure is to the caller, once retries and time are
    spent. Throttling, 5xx and timeouts (anything botocore raises itself)
    pass with time: 503. Any other refusal (a missing table, a request
    DynamoDB calls invalid, denied access) is a bug or a broken deployment:
    a 500 whose cause is logged. A refused condition is not a failure and
    never reaches here (see conditional_update)."""
    if isinstance(exc, ClientError) and _error_code(exc) not in _RETRYABLE_CODES:
        return StoreFailure()
    # The cause (botocore's class and message) goes to the log, never to the caller.
    return ServiceUnavailable("DynamoDB is unavailable, try again shortly")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def unanswered_attempts() -> int:
    """How many attempts this context has sent that went unanswered (see
    _UNANSWERED): compared before and after a call, the attempts of that call
    which may have been applied though no answer said so."""
    return _UNANSWERED.get()


def call(client: Any, table_name: str, operation: str, **kwargs: Any) -> dict[str, Any]:
    """One call on ``table_name`` (timed_call); every failure leaves as a domain error."""
    try:
        return timed_call(client, operation, TableName=table_name, **kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise domain_error(exc) from exc


def conditional_update(client: Any, table_name: str, **kwargs: Any) -> dict[str, Any]:
    """UpdateItem; when the condition does not hold, returns the item as it
    was (``{}`` if there is none) under ``"failed"`` instead of raising."""
    try:
        return call(
            client, table_name, "update_item", ReturnValuesOnConditionCheckFailure="ALL_OLD", **kwargs
        )
    except StoreFailure as failure:
        refused = failure.__cause__
        if isinstance(refused, ClientError) and _error_code(refused) == "ConditionalCheckFailedException":
            return {"failed": refused.response.get("Item", {})}
        raise
