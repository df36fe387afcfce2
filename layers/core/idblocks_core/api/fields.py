"""Every value a request carries, declared once: where it comes from and
what the OpenAPI document says it takes. The use case's domain checks
(domain/rules.py) decide and word every refusal; the schemas are built from
the same rules' constants, and tests/unit/test_fields.py holds each schema
to its check's answers, value by value."""

from __future__ import annotations

from idblocks_core.api.gateway import Field
from idblocks_core.domain import rules


def _integer(low: int, high: int) -> dict[str, object]:
    return {"type": "integer", "minimum": low, "maximum": high}


_NAME = {"type": "string", "pattern": rules.NAME_PATTERN, "minLength": 1, "maxLength": 128}
_ID = _integer(1, rules.LIMIT_MAX_ID)

NAME = Field("name", "path", _NAME, "Counter name.", required=True)
IDEMPOTENCY_KEY = Field(
    "idempotency-key",
    "header",
    {"type": "string", "pattern": rules.IDEMPOTENCY_KEY_PATTERN},
    "Makes the request safe to retry: the same caller, counter, key and count get the "
    "identical response for the key's lifetime (IdempotencyTtlSeconds).",
)
LIMIT = Field("limit", "query", _integer(1, rules.LIST_LIMIT_MAX), "Page size.", default=100)
CURSOR = Field("cursor", "query", {"type": "string", "maxLength": 512}, "From the previous page.")
LIST_DELETED = Field(
    "deleted",
    "query",
    {"type": "boolean"},
    "true: list deleted counters too, each with deleted: true and, as next, one past the high-water mark "
    "it keeps (a re-creation continues there or above); the page then says deleted: true. Default false.",
    default=False,
)

COUNT = Field(
    "count",
    "body",
    _ID,
    "How many IDs; at most the deployment's MaxBatchSize (its default is the maximum shown).",
    required=True,
    maximum_from="MaxBatchSize",
)
NEW_NAME = Field("name", "body", _NAME, "1-128 of A-Z a-z 0-9 _ . -, not . or ..", required=True)
START = Field(
    "start",
    "body",
    _ID,
    "First ID to hand out; not above max. Default 1, or right after a deleted counter's last ID.",
)
MAX = Field("max", "body", _ID, "Last ID the counter may hand out. Default 2^53-1.")
CACHE = Field(
    "cache",
    "body",
    _integer(1, rules.CACHE_MAX),
    "The most IDs each function environment takes at a time for next, and serves from memory; each "
    "takes about what it serves in half a minute, so a busy one writes once per that many IDs. 1 (the "
    "default) is a write per ID. Above 1, IDs from next are unique but increase only per environment, "
    "and unused cached IDs become gaps (docs/guarantees.md).",
)
# Documented as an int64 (a 64-bit field in generated clients); the API also
# takes 2^63, max + 1 of a counter whose max is 2^63-1 (rules.check_next).
NEXT = Field(
    "next",
    "body",
    _ID,
    "The next ID to hand out; may only move forward, and at most max + 1, which exhausts the counter. "
    "A body gives next, cache or both. The API also takes 2^63 (9223372036854775808), one past this "
    "maximum: it is max + 1 of a counter whose max is 2^63-1, and exhausts that counter.",
)
SET_DELETED = Field(
    "deleted",
    "body",
    {"type": "boolean"},
    "true: next applies to a deleted counter too, raising the high-water mark it keeps (it stays "
    "deleted, and a re-creation continues at next or above; its max does not bound it); a live one is "
    "moved as without it. Only with next alone. Default false: a deleted counter is 404.",
    default=False,
)
