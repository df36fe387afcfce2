"""idblocks client: unique, increasing IDs from an idblocks service, handed
out from memory.

    from idblocks import HttpBackend, IamAuth, Sequence

    backend = HttpBackend("https://abc123.execute-api.eu-west-1.amazonaws.com/v1", auth=IamAuth())
    with Sequence(backend, "orders") as orders:
        order_id = orders.next_id()
        line_ids = orders.take(20)   # a range of 20 IDs, step apart (1 in one region)

With several regions (RegionCount K), FailoverBackend moves from one regional
endpoint to the next when one is unavailable.

Under asyncio, AsyncSequence keeps the same promises without blocking the
event loop (``await orders.next_id()``); its HTTP backend, AsyncHttpBackend
(``from idblocks.async_backend import AsyncHttpBackend``), needs
``pip install "idblocks[async]"``.
"""

from idblocks.async_sequence import AsyncSequence
from idblocks.auth import ApiKeyAuth, IamAuth, NoAuth
from idblocks.backend import HttpBackend
from idblocks.block import Backend, Block
from idblocks.errors import (
    AuthError,
    ConfigurationError,
    Conflict,
    CounterExhausted,
    CounterMovedBack,
    CounterNotFound,
    IdBlocksError,
    InvalidName,
    InvalidRequest,
    MissingCredentials,
    MissingRegion,
    SequenceClosed,
    ServiceError,
    ServiceUnavailable,
    UnexpectedResponse,
)
from idblocks.failover import AsyncFailoverBackend, FailoverBackend
from idblocks.retry import RetryPolicy
from idblocks.routes import check_name
from idblocks.sequence import Sequence

__all__ = [
    "ApiKeyAuth",
    "AsyncFailoverBackend",
    "AsyncSequence",
    "AuthError",
    "Backend",
    "Block",
    "ConfigurationError",
    "Conflict",
    "CounterExhausted",
    "CounterMovedBack",
    "CounterNotFound",
    "FailoverBackend",
    "HttpBackend",
    "IamAuth",
    "IdBlocksError",
    "InvalidName",
    "InvalidRequest",
    "MissingCredentials",
    "MissingRegion",
    "NoAuth",
    "RetryPolicy",
    "Sequence",
    "SequenceClosed",
    "ServiceError",
    "ServiceUnavailable",
    "UnexpectedResponse",
    "check_name",
]
