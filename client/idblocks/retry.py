"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime

# Statuses that say "not now" rather than "no": throttled, or the service (or
# DynamoDB behind it) briefly unavailable.
RETRY_STATUSES = frozenset({429, 502, 503, 504})

# A 500 is an error the service did not expect. Repeating the request is safe
# only when repeating cannot take a second block (an Idempotency-Key, a read,
# a raise-only write), and worth a few tries only: a bug answers the same way.
SERVER_ERROR = 500


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by time.

    The wait before retry k (k = 1, 2, ...) is uniform in [0, min(cap, base * 2**k)],
    and never shorter than a Retry-After the service sent. A wait that would
    end past ``deadline`` (seconds since the first attempt) is not waited:
    the request fails instead. A 500 is tried at most ``server_error_attempts``
    times, and only when repeating the request is harmless.

    Until anything has answered at the endpoint, a connection refused or a
    host name that does not resolve is tried ``first_contact_attempts``
    times (once: a wrong address, or a server not started, is said at once);
    after that, as any network error. A process that starts before its
    server does may raise it to wait for the server.
    """

    attempts: int = 8
    base: float = 0.05
    cap: float = 5.0
    deadline: float = 30.0
    server_error_attempts: int = 3
    first_contact_attempts: int = 1
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    # Wall-clock seconds since the epoch: Retry-After may be an HTTP date.
    now: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.server_error_attempts < 1 or self.first_contact_attempts < 1:
            raise ValueError("attempts, server_error_attempts and first_contact_attempts must be at least 1")
        if self.base < 0 or self.cap < 0 or self.deadline < 0:
            raise ValueError("base, cap and deadline must not be negative")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        wait = self.rng.uniform(0, min(self.cap, self.base * 2**retry))
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds ("120") or an
    HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT", measured from ``now``, the
    wall clock by default). A date already past means no wait; anything
    unreadable, None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are always in GMT, whatever the zone says
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
