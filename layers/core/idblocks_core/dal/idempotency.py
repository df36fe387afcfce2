"""Where Idempotency-Key records live: Powertools' DynamoDB persistence
layer and its configuration, and the utility's errors as domain errors.
Imported only by a request that carries a key, so requests without one
(and cold starts) skip loading the Idempotency utility.

A record is keyed by (caller, counter, key), so one caller can never read, or
collide with, another caller's result, and its payload check is the count, so
the same key with a different count is refused instead of answered with the
wrong block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)

from idblocks_core.dal.dynamodb import RetryingClient
from idblocks_core.domain.errors import IdempotencyKeyReused, RequestInProgress, ServiceUnavailable

# Fields of the request the use case hands to the idempotent step.
RECORD_KEY = "[caller, counter, key]"
PAYLOAD_CHECK = "count"
# Keeps records independent of the function's deployed name, so next and
# batch share one namespace per caller and counter.
KEY_PREFIX = "allocation"


def idempotency_config(ttl_seconds: int) -> IdempotencyConfig:
    return IdempotencyConfig(
        event_key_jmespath=RECORD_KEY,
        payload_validation_jmespath=PAYLOAD_CHECK,
        raise_on_no_idempotency_key=True,
        expires_after_seconds=ttl_seconds,
    )


def persistence_layer(table_name: str, client: Any) -> DynamoDBPersistenceLayer:
    """Records in ``table_name``, through the store's client and retries:
    the utility's own calls keep to the invocation's deadline too."""
    return DynamoDBPersistenceLayer(table_name=table_name, boto3_client=RetryingClient(client))


@contextlib.contextmanager
def record_errors_as_domain_errors() -> Iterator[None]:
    try:
        yield
    except IdempotencyValidationError:
        raise IdempotencyKeyReused() from None
    except IdempotencyAlreadyInProgressError:
        raise RequestInProgress() from None
    except IdempotencyPersistenceLayerError as exc:
        raise ServiceUnavailable("the idempotency store is unavailable, try again shortly") from exc
