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

Outside Lambda ``snapshot_restore_py`` is absent and nothing is registered;
where it is installed but no runtime restores (a developer's machine), the
function is registered and never called. Either way importing changes
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["after_restore", "register_with_runtime", "restores"]

# How many restores this process has been through: a request begun before
# one is not sent after it (idblocks.exchange).
restores = 0

# Each module's handler for the objects it keeps (Sequences, backends).
_handlers: list[Callable[[], None]] = []


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
