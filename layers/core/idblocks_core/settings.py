"""The function's configuration, as the environment that template.yaml sets
declares it: each field names its variable and how to read it. Resource
names have no defaults: a missing one is a deployment error and is reported
as such, not papered over."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from idblocks_core.domain.rules import LIMIT_MAX_ID, REGION_COUNT_MAX


class ConfigurationError(RuntimeError):
    pass


def _text(key: str, raw: str) -> str:
    return raw


def _boolean(key: str, raw: str) -> bool:
    value = raw.lower()
    if value not in ("true", "false"):
        raise ConfigurationError(f"{key} must be 'true' or 'false', not {value!r}")
    return value == "true"


def _integer(low: int, high: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigurationError(f"{key} must be an integer, not {raw!r}") from None
        if not low <= value <= high:
            raise ConfigurationError(f"{key} must be from {low} to {high}, not {value}")
        return value

    return parse


def _from_env(variable: str, parse: Callable[[str, str], Any]) -> Any:
    return field(metadata={"variable": variable, "parse": parse})


@dataclass(frozen=True)
class Settings:
    counters_table: str = _from_env("COUNTERS_TABLE", _text)
    idempotency_table: str = _from_env("IDEMPOTENCY_TABLE", _text)
    auto_create_counters: bool = _from_env("AUTO_CREATE_COUNTERS", _boolean)
    max_batch_size: int = _from_env("MAX_BATCH_SIZE", _integer(1, LIMIT_MAX_ID))
    # template.yaml's IdempotencyTtlSeconds takes the same range.
    idempotency_ttl_seconds: int = _from_env("IDEMPOTENCY_TTL_SECONDS", _integer(3600, 7 * 86400))
    allow_get_next: bool = _from_env("ALLOW_GET_NEXT", _boolean)
    # The stride scheme (docs/global.md): this deployment hands out the IDs
    # congruent to region_index modulo region_count.
    region_count: int = _from_env("REGION_COUNT", _integer(1, REGION_COUNT_MAX))
    region_index: int = _from_env("REGION_INDEX", _integer(0, REGION_COUNT_MAX - 1))
    # The API stage whose events the function answers (requestContext.stage).
    api_stage: str = _from_env("API_STAGE", _text)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Every variable is required (template.yaml sets them all)."""
        values = {}
        for spec in fields(cls):
            variable = spec.metadata["variable"]
            raw = env.get(variable, "").strip()
            if not raw:
                raise ConfigurationError(f"environment variable {variable} is not set")
            values[spec.name] = spec.metadata["parse"](variable, raw)
        if values["region_index"] >= values["region_count"]:
            # Region index K of K would hand out residue 0, region 0's IDs.
            raise ConfigurationError(
                f"REGION_INDEX must be from 0 to REGION_COUNT - 1 ({values['region_count'] - 1}), "
                f"not {values['region_index']}"
            )
        return cls(**values)
