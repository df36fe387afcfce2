"""The API's request and response bodies as pydantic models, from which
Powertools generates the OpenAPI document (docs/openapi.json) at development
time. No handler imports this module: requests are validated from the same
declarations (api/fields.py) without pydantic, which the request models here
are built from, so the two cannot drift apart.

Integers are strict: "5", 5.0 and true are not counts. Bounds that depend on
the deployment (MaxBatchSize) or on a counter's state are checked by the core,
which answers with the same error shape.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from idblocks_core.api.fields import BODIES
from idblocks_core.api.fields import Field as FieldSpec

# The upper bound (2^63-1) is checked by the core, not stated in the schema:
# the OpenAPI document would round it to a float, 2^63, one too many.
PositiveId = Annotated[StrictInt, Field(ge=1)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _annotation(spec: FieldSpec) -> Any:
    """The pydantic type of a body field of api/fields.py, by its kind."""
    kinds = {"positive_int": PositiveId, "text": str}
    if spec.required:
        return Annotated[kinds[spec.kind], Field(**spec.doc)]
    # An optional field without a default may be sent as null; one with a
    # default takes only its own kind.
    kind = kinds[spec.kind] | None if spec.default is None else kinds[spec.kind]
    return (kind, Field(default=spec.default, **spec.doc))


def _body_model(name: str, fields: tuple[FieldSpec, ...]) -> type[BaseModel]:
    definitions = {
        spec.name: (_annotation(spec), ...) if spec.required else _annotation(spec) for spec in fields
    }
    return create_model(name, __base__=_Body, __module__=__name__, **definitions)


BatchRequest = _body_model("BatchRequest", BODIES["BatchRequest"])
CreateCounterRequest = _body_model("CreateCounterRequest", BODIES["CreateCounterRequest"])
SetNextRequest = _body_model("SetNextRequest", BODIES["SetNextRequest"])
REQUEST_MODELS: dict[str, type[BaseModel]] = {
    "BatchRequest": BatchRequest,
    "CreateCounterRequest": CreateCounterRequest,
    "SetNextRequest": SetNextRequest,
}


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
