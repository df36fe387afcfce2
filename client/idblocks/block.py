"""A block of IDs, what every backend hands out, and what a Sequence (and an
AsyncSequence) needs of a backend."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Block:
    """IDs ``start``, ``start + step``, ... up to ``end``, both included.
    ``step`` is the service's RegionCount: 1 (consecutive IDs) in a single
    region, K when K regions each hand out their own residue modulo K."""

    start: int
    end: int
    step: int = 1
    # Attempts of the request for this block that the service refused for
    # capacity (429, 503) before answering it: the counter is hot. Not part
    # of the block's identity.
    capacity_refusals: int = field(default=0, compare=False)

    def __len__(self) -> int:
        return (self.end - self.start) // self.step + 1

    def ids(self) -> range:
        return range(self.start, self.end + 1, self.step)


class Backend(Protocol):
    """What a Sequence needs: one call that hands out a block."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block: ...


class AsyncBackend(Protocol):
    """What an AsyncSequence needs: one call whose awaitable hands out a block
    (an ``async def allocate``)."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Awaitable[Block]: ...
