"""The API's request and response bodies. They validate requests and, through
Powertools, generate the OpenAPI document (docs/openapi.json).

Integers are strict: "5", 5.0 and true are not counts. Bounds that depend on
the deployment (MaxBatchSize) or on a counter's state are checked by the core,
which answers with the same error shape.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from idblocks_core.domain.rules import CACHE_MAX, LIMIT_MAX_ID, NAME_PATTERN

# The upper bound (2^63-1) is checked by the core, not stated in the schema:
# the OpenAPI document would round it to a float, 2^63, one too many.
PositiveId = Annotated[StrictInt, Field(ge=1)]
CacheSetting = Annotated[
    StrictInt,
    Field(
        ge=1,
        le=CACHE_MAX,
        description=(
            "How many IDs each function environment takes at a time for next, and serves from memory: "
            "one write per that many IDs. 1 (the default) is a write per ID. Above 1, IDs from next are "
            "unique but increase only per environment, and unused cached IDs become gaps "
            "(docs/guarantees.md)."
        ),
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BatchRequest(_Body):
    count: Annotated[
        StrictInt, Field(ge=1, description="How many IDs; at most the deployment's MaxBatchSize.")
    ]


class CreateCounterRequest(_Body):
    name: Annotated[str, Field(pattern=NAME_PATTERN, description="1-128 of A-Z a-z 0-9 _ . -, not . or ..")]
    start: PositiveId | None = Field(
        default=None,
        description=(
            f"First ID to hand out, at most {LIMIT_MAX_ID}. "
            "Default 1, or right after a deleted counter's last ID."
        ),
    )
    max: PositiveId | None = Field(
        default=None, description=f"Last ID the counter may hand out, at most {LIMIT_MAX_ID}. Default 2^53-1."
    )
    cache: CacheSetting | None = None


class SetNextRequest(_Body):
    """At least one of the two."""

    next: (
        Annotated[
            StrictInt,
            Field(ge=1, description="The next ID to hand out; may only move forward, and at most max + 1."),
        ]
        | None
    ) = None
    cache: CacheSetting | None = None


class NextResult(BaseModel):
    counter: str
    id: int


class BatchResult(BaseModel):
    counter: str
    start: int = Field(description="First ID of the block.")
    end: int = Field(description="Last ID of the block (inclusive).")
    count: int
    step: int = Field(
        description="The deployment's RegionCount: the IDs are start + j * step for j from 0 to count - 1 "
        "(end included). 1 in a single region, where they are consecutive."
    )


class CounterState(BaseModel):
    name: str
    next: int | None = Field(
        description="The next ID this counter will hand out; null once it is exhausted (no ID is left)."
    )
    exhausted: bool = Field(
        description="True when the counter has handed out its max (or was set to max + 1): "
        "next and batch answer counter_exhausted."
    )
    max: int = Field(description="The last ID this counter may hand out.")
    step: int = Field(description="The RegionCount the counter was created with (1: a single region).")
    residue: int = Field(
        description="The RegionIndex it was created with: every ID it hands out is residue modulo step."
    )
    cache: int = Field(
        description="How many IDs each function environment takes at a time for next (1: uncached)."
    )
    created_at: str
    updated_at: str


class CounterPage(BaseModel):
    counters: list[CounterState]
    cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. counter_exhausted.")
    message: str = Field(description="What is wrong, for a human.")


class ErrorBody(BaseModel):
    error: ErrorDetail
