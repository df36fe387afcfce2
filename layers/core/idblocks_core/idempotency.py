"""Idempotency-Key support for next and batch, on Powertools' Idempotency utility.

A record is keyed by (caller, counter, key), so one caller can never read, or
collide with, another caller's result, and its payload check is the count, so
the same key with a different count is refused instead of answered with the
wrong block. The allocation runs with a token derived from the same values:
if the allocation write committed but the request failed afterwards, the retry
finds that write and returns its block instead of taking a second one.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)

from idblocks_core.counters import get_counters
from idblocks_core.errors import IdempotencyKeyReused, RequestInProgress, ServiceUnavailable
from idblocks_core.model import Block
from idblocks_core.settings import get_settings
from idblocks_core.store import RetryingClient


def allocation_token(caller: str, counter: str, key: str, count: int) -> str:
    return hashlib.sha256(f"{caller}\n{counter}\n{key}\n{count}".encode()).hexdigest()


@functools.cache
def _config() -> IdempotencyConfig:
    return IdempotencyConfig(
        event_key_jmespath="[caller, counter, key]",
        payload_validation_jmespath="count",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=get_settings().idempotency_ttl_seconds,
    )


@functools.cache
def _idempotent_allocate() -> Callable[..., dict[str, int]]:
    # The store's client, through the store's retries: the utility's own
    # calls keep to the invocation's deadline too.
    persistence = DynamoDBPersistenceLayer(
        table_name=get_settings().idempotency_table,
        boto3_client=RetryingClient(),
    )

    # key_prefix keeps records independent of the function's deployed name,
    # so next and batch share one namespace per caller and counter.
    @idempotent_function(
        data_keyword_argument="request",
        persistence_store=persistence,
        config=_config(),
        key_prefix="allocation",
    )
    def allocate(request: dict[str, Any], on_fresh: Callable[[Block], None]) -> dict[str, int]:
        token = allocation_token(request["caller"], request["counter"], request["key"], request["count"])
        block = get_counters().allocate(request["counter"], request["count"], token=token)
        on_fresh(block)
        return {"start": block.start, "end": block.end}

    return allocate


def allocate_once(
    *,
    caller: str,
    counter: str,
    count: int,
    key: str,
    lambda_context: Any,
    on_fresh: Callable[[Block], None],
) -> Block:
    """Allocate, or return what an earlier request with this key got.
    ``on_fresh`` runs only when IDs are really allocated, not on a replay."""
    # Input is checked before a record is written, so a bad request cannot
    # leave a record behind that would turn its corrected retry into a 422.
    get_counters().check_allocation(counter, count)
    _config().register_lambda_context(lambda_context)
    request = {"caller": caller, "counter": counter, "key": key, "count": count}
    try:
        result = _idempotent_allocate()(request=request, on_fresh=on_fresh)
    except IdempotencyValidationError:
        raise IdempotencyKeyReused() from None
    except IdempotencyAlreadyInProgressError:
        raise RequestInProgress() from None
    except IdempotencyPersistenceLayerError as exc:
        raise ServiceUnavailable("the idempotency store is unavailable, try again shortly") from exc
    return Block(result["start"], result["end"])
