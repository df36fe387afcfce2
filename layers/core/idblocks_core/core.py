"""One core per environment: settings, store and use cases, built together
by build_core() and kept once per process (once per Lambda container) by
core(). Tests that change the environment call reset_core()."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from idblocks_core.dal.counter_store import CounterStore
from idblocks_core.dal.dynamodb import deadline
from idblocks_core.logic.admin import CounterAdmin
from idblocks_core.logic.allocation import IdAllocator
from idblocks_core.logic.next_cache import forget_all_cached_blocks
from idblocks_core.logic.taken_marks import forget_all_taken_marks
from idblocks_core.settings import Settings

# The handlers enter it around each invocation, so that every DynamoDB call
# the invocation makes ends before the function's timeout.
invocation_deadline = deadline


@dataclass(frozen=True)
class Core:
    settings: Settings
    store: CounterStore
    allocator: IdAllocator
    admin: CounterAdmin


def build_core(env: Mapping[str, str] | None = None) -> Core:
    settings = Settings.from_env(os.environ if env is None else env)
    store = CounterStore(settings.counters_table, step=settings.region_count, residue=settings.region_index)
    allocator = IdAllocator(
        store,
        auto_create=settings.auto_create_counters,
        max_batch_size=settings.max_batch_size,
        replay_window=timedelta(seconds=settings.idempotency_ttl_seconds),
        idempotency_table=settings.idempotency_table,
    )
    return Core(settings=settings, store=store, allocator=allocator, admin=CounterAdmin(store))


@functools.cache
def core() -> Core:
    return build_core()


def reset_core() -> None:
    core.cache_clear()


def reseed_after_restore() -> None:
    """Give this environment its own randomness after a SnapStart restore.

    Every environment restored from one snapshot starts with the same memory,
    so the same state of ``random``'s shared generator, which botocore draws
    its retry jitter from: restored copies would retry DynamoDB in lockstep.
    IDs and tokens never come from that generator (tokens are drawn from the
    kernel per request, our own jitter is SystemRandom), and nothing that
    names an allocation is made at init."""
    random.seed()
    # No block is taken at init, so a snapshot holds none; should one ever
    # be, every restored copy would serve the same IDs from it.
    forget_all_cached_blocks()
    # Nor a mark of what was taken: a restored copy has taken nothing yet.
    forget_all_taken_marks()


def register_restore_hooks() -> bool:
    """Register with the Lambda runtime's snapshot_restore_py, present in the
    python3.12+ runtimes and absent elsewhere (tests, the dev server), where
    there is no snapshot to restore from."""
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return False
    register_after_restore(reseed_after_restore)
    return True


register_restore_hooks()
