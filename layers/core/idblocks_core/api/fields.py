"""Every value a request carries, declared once: where it comes from, the
shape the API documents for it, and the core's check that words a refusal.

The request path reads these declarations (api/resolver.py) without
pydantic; the OpenAPI document is built from the same declarations at
development time (api/schemas.py turns the bodies into pydantic models,
localrun/openapi.py the parameters into Powertools' parameter types). A new
body field is one more ``Field(...)`` in its body: validation, its error and
its documentation follow.

A ``kind`` is what the documented schema accepts, which may be wider than
the core: the schema says "an integer >= 1", the core "at most
MaxBatchSize". A value the schema refuses is reported in the words of the
field's check; one it accepts goes to the use case, whose checks refuse the
rest in the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from idblocks_core.domain.errors import InvalidInput
from idblocks_core.domain.rules import (
    CACHE_MAX,
    IDEMPOTENCY_KEY_PATTERN,
    LIMIT_MAX_ID,
    LIST_LIMIT_MAX,
    NAME_PATTERN,
    check_cache,
    check_count,
    check_idempotency_key,
    check_limit,
    check_name,
    check_new_counter,
    check_next,
)

_NAME_RE = re.compile(NAME_PATTERN)
_IDEMPOTENCY_KEY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)

# A query string is text; the documented integer is read as pydantic's lax
# mode reads one (the contract the OpenAPI document was written against):
# surrounding Unicode white space, a sign, ASCII digits with single
# underscores between them, and a fraction of zeros only ("5.0" is 5).
_LAX_INT_RE = re.compile(r"[+-]?[0-9](?:_?[0-9])*(?:\.0+)?")
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)


class Refused(Exception):
    """A value the documented schema does not accept."""


def strict_int(low: int | None = None, high: int | None = None) -> Callable[[Any], int]:
    """A JSON integer (not a float, a string or a boolean) within the bounds."""

    def accept(value: Any) -> int:
        if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
            raise Refused
        return value

    return accept


def lax_int(low: int, high: int) -> Callable[[Any], int]:
    """An integer written as text, within the bounds."""

    def accept(value: Any) -> int:
        if not isinstance(value, str):
            raise Refused
        text = value.strip(_WHITE_SPACE)
        if not _LAX_INT_RE.fullmatch(text):
            raise Refused
        number = int(text.split(".")[0])
        if not low <= number <= high:
            raise Refused
        return number

    return accept


def text(pattern: re.Pattern[str] | None = None, max_length: int | None = None) -> Callable[[Any], str]:
    def accept(value: Any) -> str:
        if not isinstance(value, str):
            raise Refused
        if max_length is not None and len(value) > max_length:
            raise Refused
        # The patterns are anchored (^...$) and read as pydantic reads them,
        # where $ is the end of the text, not a line: "orders\n" is no name.
        if pattern is not None and not pattern.fullmatch(value):
            raise Refused
        return value

    return accept


def _reject_cursor(_: object) -> None:
    raise InvalidInput("invalid_cursor", "cursor is not one this API returned")


def _check_count(value: object) -> object:
    # The bound is the deployment's; core() is only asked when a count is refused.
    from idblocks_core.core import core

    return check_count(value, core().settings.max_batch_size)


@dataclass(frozen=True)
class Field:
    """One value of a request.

    ``name`` is how the request spells it (a header's in lower case), ``arg``
    the handler's name for it, ``kind`` its documented type (text, int,
    positive_int), ``doc`` the rest of its documented schema (pattern,
    bounds, alias, description: localrun/openapi.py and api/schemas.py hand
    it to pydantic), ``accept`` that schema as the request path applies it
    (raises Refused; tests/unit/test_fields.py holds the two to the same
    answers) and ``check`` the core's check that words a refusal."""

    name: str
    where: str  # path | query | header | body
    kind: str
    accept: Callable[[Any], Any]
    check: Callable[[Any], object]
    required: bool = True
    default: Any = None
    arg: str = ""
    doc: dict[str, Any] = field(default_factory=dict)

    @property
    def argument(self) -> str:
        return self.arg or self.name


# -- parameters --------------------------------------------------------------

NAME = Field(
    "name",
    "path",
    "text",
    text(_NAME_RE, max_length=128),
    check_name,
    doc={"pattern": NAME_PATTERN, "min_length": 1, "max_length": 128, "description": "Counter name."},
)
IDEMPOTENCY_KEY = Field(
    "idempotency-key",
    "header",
    "text",
    text(_IDEMPOTENCY_KEY_RE),
    check_idempotency_key,
    required=False,
    arg="idempotency_key",
    doc={
        "alias": "Idempotency-Key",
        "pattern": IDEMPOTENCY_KEY_PATTERN,
        "description": (
            "Makes the request safe to retry: the same caller, counter, key and count get the "
            "identical response for the key's lifetime (IdempotencyTtlSeconds)."
        ),
    },
)
LIMIT = Field(
    "limit",
    "query",
    "int",
    lax_int(1, LIST_LIMIT_MAX),
    lambda value: check_limit(value, LIST_LIMIT_MAX),
    required=False,
    default=100,
    doc={"description": "Page size.", "ge": 1, "le": LIST_LIMIT_MAX},
)
CURSOR = Field(
    "cursor",
    "query",
    "text",
    text(max_length=512),
    _reject_cursor,
    required=False,
    doc={"description": "From the previous page.", "max_length": 512},
)

# -- bodies (JSON objects; a field not declared here is refused) ---------------

_POSITIVE = strict_int(low=1)

BATCH_BODY = (
    Field(
        "count",
        "body",
        "positive_int",
        _POSITIVE,
        _check_count,
        doc={"description": "How many IDs; at most the deployment's MaxBatchSize."},
    ),
)


def _cache_field() -> Field:
    return Field(
        "cache",
        "body",
        "positive_int",
        strict_int(low=1, high=CACHE_MAX),
        check_cache,
        required=False,
        doc={
            "le": CACHE_MAX,
            "description": (
                "How many IDs each function environment takes at a time for next, and serves from memory: "
                "one write per that many IDs. 1 (the default) is a write per ID. Above 1, IDs from next are "
                "unique but increase only per environment, and unused cached IDs become gaps "
                "(docs/guarantees.md)."
            ),
        },
    )


CREATE_BODY = (
    Field(
        "name",
        "body",
        "text",
        text(_NAME_RE),
        check_name,
        doc={"pattern": NAME_PATTERN, "description": "1-128 of A-Z a-z 0-9 _ . -, not . or .."},
    ),
    Field(
        "start",
        "body",
        "positive_int",
        _POSITIVE,
        lambda value: check_new_counter(value, LIMIT_MAX_ID),
        required=False,
        doc={
            "description": (
                f"First ID to hand out, at most {LIMIT_MAX_ID}. "
                "Default 1, or right after a deleted counter's last ID."
            )
        },
    ),
    Field(
        "max",
        "body",
        "positive_int",
        _POSITIVE,
        lambda value: check_new_counter(None, value),
        required=False,
        doc={"description": f"Last ID the counter may hand out, at most {LIMIT_MAX_ID}. Default 2^53-1."},
    ),
    _cache_field(),
)
# Either or both; the use case refuses a body with neither (invalid_body).
SET_NEXT_BODY = (
    Field(
        "next",
        "body",
        "positive_int",
        _POSITIVE,
        check_next,
        required=False,
        doc={
            "description": (
                "The next ID to hand out; may only move forward, and at most max + 1. "
                "A body gives next, cache or both."
            )
        },
    ),
    _cache_field(),
)

# The documented name of each body (its schema in the OpenAPI document).
BODIES: dict[str, tuple[Field, ...]] = {
    "BatchRequest": BATCH_BODY,
    "CreateCounterRequest": CREATE_BODY,
    "SetNextRequest": SET_NEXT_BODY,
}
PARAMETERS = (NAME, IDEMPOTENCY_KEY, LIMIT, CURSOR)

# The check that words the refusal of each field, by the lower-case name the
# request gives it (headers arrive in any case).
FIELD_CHECKS: dict[str, Callable[[Any], object]] = {
    spec.name.lower(): spec.check for spec in (*PARAMETERS, *(f for body in BODIES.values() for f in body))
}
