"""IDs handed out from memory, a block at a time, with the client
openapi-python-client generates from docs/openapi.json: the pattern the
shipped clients implement, in its simplest form.

    from idblocks_client import Client

    ids = Blocks(Client(base_url="http://127.0.0.1:3000"), "orders", size=100)
    order_id = ids.next()

Keep the block's start, end and step: its IDs are start, start + step, ...
up to end. Hand them out one by one, and ask for the next block when it is
used up. A lost answer (a timeout, a dropped connection) means the block may
have been taken: ask again with the same Idempotency-Key, and the service
answers with that same block (a new key would take another and leave the
first unused: a gap, never a duplicate). A block is its process's alone:
take blocks after a fork, never before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
from idblocks_client import Client
from idblocks_client.api.ids import batch
from idblocks_client.models import BatchRequest, BatchResult, ErrorBody, ErrorCode

ATTEMPTS = 5
# The answers that asking again, with the same key, can cure (docs/errors.md).
RETRYABLE = {
    ErrorCode.REQUEST_IN_PROGRESS,
    ErrorCode.THROTTLED,
    ErrorCode.SERVICE_UNAVAILABLE,
    ErrorCode.GATEWAY_TIMEOUT,
}


class Blocks:
    def __init__(self, client: Client, counter: str, size: int = 100) -> None:
        self.client = client
        self.counter = counter
        self.size = size
        self._ids: Iterator[int] = iter(())

    def next(self) -> int:
        for id_ in self._ids:
            return id_
        block = self._take()
        self._ids = iter(range(block.start, block.end + 1, block.step))
        return next(self._ids)

    def _take(self) -> BatchResult:
        key = str(uuid.uuid4())  # one key per block, the same for every attempt at it
        for attempt in range(ATTEMPTS):
            wait = 0.1 * 2**attempt
            try:
                answer = batch.sync_detailed(
                    self.counter, client=self.client, body=BatchRequest(count=self.size), idempotency_key=key
                )
            except httpx.TransportError:
                pass  # the answer was lost, not the block: the same key gets it
            else:
                if isinstance(answer.parsed, BatchResult):
                    return answer.parsed
                code = answer.parsed.error.code if isinstance(answer.parsed, ErrorBody) else None
                if code not in RETRYABLE and answer.status_code < 500:
                    raise RuntimeError(f"{self.counter}: {answer.status_code} {code}")
                # the service sends Retry-After in seconds
                wait = max(wait, float(answer.headers.get("Retry-After", 0)))
            time.sleep(wait)
        raise RuntimeError(f"{self.counter}: no block after {ATTEMPTS} attempts")
