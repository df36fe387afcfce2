"""Lambda SnapStart: every execution environment restored from one snapshot
starts from the same memory. A Sequence that drew an ID during init carries
its block into the snapshot, and a block request it had made carries its
Idempotency-Key: each restored environment would hand out the same IDs, and
a key sent again is answered with the same block, by design.

After each restore, Lambda's Python runtimes (3.12 and later) run the
functions registered with their ``snapshot_restore_py``. The client registers
one, ``after_restore``: every live Sequence, AsyncSequence and HTTP backend
starts afresh, as in a forked child (drops what it held, counted in
``unused_ids``; abandons its block request, whose key is never sent again;
closes its pooled connections; reseeds its retry jitter), and the next draw
fetches a block of its own with a key drawn after the restore.

A request begun before a restore (when its key was drawn: a Sequence's
request) sends nothing after it, wherever it was when the snapshot was taken:
being signed, waiting for a connection, resolving a name. Each transport
checks, as the last thing before its first byte, that no restore came since
the request began (``check_not_restored_since``); the request then fails with
ServiceUnavailable, its key unsent.

Outside Lambda ``snapshot_restore_py`` is absent and nothing is registered;
where it is installed but no runtime restores (a developer's machine), the
function is registered and never called. Either way importing changes
nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["RestoredSinceBegun", "after_restore", "register_with_runtime", "restores"]

# How many restores this process has been through: a request begun before
# one is not sent after it (idblocks.exchange).
restores = 0

# Each module's handler for the objects it keeps (Sequences, backends).
_handlers: list[Callable[[], None]] = []

# How many restores there had been when the request being made in this
# context began, where that is earlier than the request's first attempt (a
# Sequence draws a request's key, then lets its lock go, then sends); and,
# around each attempt, the value a transport checks.
_began: ContextVar[int | None] = ContextVar("idblocks_request_began", default=None)


class RestoredSinceBegun(Exception):
    """Raised inside a transport, before anything is written: the process was
    restored from a snapshot since the request began."""


def began() -> int:
    """How many restores there had been when the request being made in this
    context began: the value ``requests_begun_at`` set, else now."""
    value = _began.get()
    return restores if value is None else value


@contextlib.contextmanager
def requests_begun_at(count: int) -> Iterator[None]:
    """Requests made inside (in this thread or task) count as begun when
    ``count`` restores had happened."""
    token = _began.set(count)
    try:
        yield
    finally:
        _began.reset(token)


def restored_since(begun: int) -> bool:
    """Whether the process was restored from a snapshot after ``begun``
    restores had happened."""
    return restores != begun


def check_not_restored_since(begun: int | None = None) -> None:
    """Raise RestoredSinceBegun if a restore came after ``begun`` (by
    default, the value ``requests_begun_at`` set): what a transport calls
    last before it writes a request's first byte."""
    if restored_since(began() if begun is None else begun):
        raise RestoredSinceBegun(f"restored from a snapshot since the request began ({restores} restore(s))")


def on_restore(handler: Callable[[], None]) -> Callable[[], None]:
    """Run ``handler`` in ``after_restore``, in the order registered."""
    _handlers.append(handler)
    return handler


def after_restore() -> None:
    """Start every live Sequence, AsyncSequence and HTTP backend afresh:
    what the runtime runs after each restore from a snapshot."""
    global restores
    restores += 1
    for handler in _handlers:
        handler()


def register_with_runtime() -> bool:
    """Register ``after_restore`` with the Lambda runtime's
    snapshot_restore_py; False where it cannot be imported (anywhere but
    Lambda, unless installed), and then nothing is registered."""
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return False
    register_after_restore(after_restore)
    return True


register_with_runtime()
