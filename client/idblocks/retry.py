"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Statuses that say "not now" rather than "no": throttled, or the service (or
# DynamoDB behind it) briefly unavailable.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by time.

    The wait before retry k (k = 1, 2, ...) is uniform in [0, min(cap, base * 2**k)],
    and never shorter than a Retry-After the service sent.
    """

    attempts: int = 8
    base: float = 0.05
    cap: float = 5.0
    deadline: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base < 0 or self.cap < 0 or self.deadline < 0:
            raise ValueError("attempts must be at least 1; base, cap and deadline not negative")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        wait = self.rng.uniform(0, min(self.cap, self.base * 2**retry))
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the service sends seconds; HTTP dates are ignored)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
