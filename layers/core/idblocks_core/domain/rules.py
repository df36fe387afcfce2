"""The rules every counter and request obeys. Pure functions, no I/O."""

from __future__ import annotations

import re
from typing import TypeIs

from idblocks_core.domain.errors import InvalidInput

# 1-128 characters of A-Z a-z 0-9 _ . -, but not "." or "..": those are dot
# segments, which URL handling collapses (/counters/./next arrives as
# /counters/next), so no HTTP client could reach such a counter. Spelled
# without look-around, which pydantic's regex engine (and so the validation of
# paths and bodies) does not have: a first character that is not a dot, or
# one dot and then a character that is not, or two dots and at least one more.
NAME_PATTERN = (
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}"
    r"|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,126}"
    r"|\.\.[A-Za-z0-9_.-]{1,126})$"
)
NAME_RULE = "1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', and not '.' or '..'"
_NAME_RE = re.compile(NAME_PATTERN)

# The largest page of GET /admin/counters.
LIST_LIMIT_MAX = 1000

# The largest integer a JavaScript client can hold exactly; the default ceiling.
DEFAULT_MAX_ID = 2**53 - 1
# The largest ID any counter may reach: a signed 64-bit integer.
LIMIT_MAX_ID = 2**63 - 1

# Opaque request tokens (Idempotency-Key): printable ASCII without spaces.
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,128}$"
_IDEMPOTENCY_KEY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)


def _is_int(value: object) -> TypeIs[int]:
    # bool is an int subclass; True is not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInput(
            "invalid_name",
            f"counter name must be {NAME_RULE}",
        )
    return name


def check_count(count: object, max_batch_size: int) -> int:
    if not _is_int(count) or not 1 <= count <= max_batch_size:
        raise InvalidInput("invalid_count", f"count must be an integer from 1 to {max_batch_size}")
    return count


def check_new_counter(start: object, max_id: object) -> tuple[int | None, int]:
    """Validate create parameters; ``start`` None means "from 1" (or, for a
    deleted counter, right after its high-water mark)."""
    if max_id is None:
        max_id = DEFAULT_MAX_ID
    if not _is_int(max_id) or not 1 <= max_id <= LIMIT_MAX_ID:
        raise InvalidInput("invalid_max", f"max must be an integer from 1 to {LIMIT_MAX_ID}")
    if start is not None:
        if not _is_int(start) or not 1 <= start <= LIMIT_MAX_ID:
            raise InvalidInput("invalid_start", f"start must be an integer from 1 to {LIMIT_MAX_ID}")
        if start > max_id:
            raise InvalidInput("invalid_start", f"start {start} is above max {max_id}")
    return start, max_id


def check_next(next_id: object) -> int:
    # A counter whose next ID is max + 1 is exhausted; that is as far as it goes.
    if not _is_int(next_id) or not 1 <= next_id <= LIMIT_MAX_ID + 1:
        raise InvalidInput("invalid_next", f"next must be an integer from 1 to {LIMIT_MAX_ID + 1}")
    return next_id


# A counter's cache setting: the most IDs one function environment takes at
# a time for next. The ceiling is what one environment could ever serve in
# a block's bounded life (logic/next_cache.py, 60 s): it answers one request
# at a time, so even 10,000 requests/s, far beyond what a single environment
# behind API Gateway sees, serve 600,000 IDs a block. A larger block would
# never drain; it would only widen the gap an expired or recycled
# environment leaves.
CACHE_MAX = 1_000_000


def check_cache(cache: object) -> int:
    if not _is_int(cache) or not 1 <= cache <= CACHE_MAX:
        raise InvalidInput("invalid_cache", f"cache must be an integer from 1 to {CACHE_MAX:,}")
    return cache


def check_idempotency_key(key: object) -> str:
    if not isinstance(key, str) or not _IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise InvalidInput(
            "invalid_idempotency_key",
            "Idempotency-Key must be 1-128 printable ASCII characters without spaces",
        )
    return key


def check_deleted(deleted: object) -> bool:
    """``deleted``: whether deleted counters are included (a list's, a PUT's)."""
    if not isinstance(deleted, bool):
        raise InvalidInput("invalid_deleted", "deleted must be true or false")
    return deleted


def check_limit(limit: object, largest: int) -> int:
    if not _is_int(limit) or not 1 <= limit <= largest:
        raise InvalidInput("invalid_limit", f"limit must be an integer from 1 to {largest}")
    return limit


# -- regions: the stride scheme ------------------------------------------------
# A deployment in region i of K hands out only IDs congruent to i modulo K, so
# K regions never hand out the same ID and never need to talk to each other.
# K = 1 (residue 0) is every ID, as in a single region.
REGION_COUNT_MAX = 1000


def first_in_residue(at_least: int, step: int, residue: int) -> int:
    """The smallest ID >= ``at_least`` that is congruent to ``residue`` modulo ``step``."""
    return at_least + (residue - at_least) % step
