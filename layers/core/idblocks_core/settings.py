"""The function's configuration, parsed once from the environment that
template.yaml sets. Resource names have no defaults: a missing one is a
deployment error and is reported as such, not papered over."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from idblocks_core.rules import LIMIT_MAX_ID


class ConfigurationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Settings:
    counters_table: str
    idempotency_table: str
    auto_create_counters: bool
    max_batch_size: int
    idempotency_ttl_seconds: int
    allow_get_next: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            counters_table=_required(env, "COUNTERS_TABLE"),
            idempotency_table=_required(env, "IDEMPOTENCY_TABLE"),
            auto_create_counters=_boolean(env, "AUTO_CREATE_COUNTERS"),
            max_batch_size=_integer(env, "MAX_BATCH_SIZE", 1, LIMIT_MAX_ID),
            idempotency_ttl_seconds=_integer(env, "IDEMPOTENCY_TTL_SECONDS", 3600, 366 * 86400),
            allow_get_next=_boolean(env, "ALLOW_GET_NEXT"),
        )


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "").strip()
    if not value:
        raise ConfigurationError(f"environment variable {key} is not set")
    return value


def _boolean(env: Mapping[str, str], key: str) -> bool:
    value = _required(env, key).lower()
    if value not in ("true", "false"):
        raise ConfigurationError(f"{key} must be 'true' or 'false', not {value!r}")
    return value == "true"


def _integer(env: Mapping[str, str], key: str, low: int, high: int) -> int:
    raw = _required(env, key)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{key} must be an integer, not {raw!r}") from None
    if not low <= value <= high:
        raise ConfigurationError(f"{key} must be from {low} to {high}, not {value}")
    return value


@functools.cache
def get_settings() -> Settings:
    return Settings.from_env(os.environ)
