"""Lambda SnapStart's after-restore hooks, run as the runtime runs them.

After restoring an environment from a snapshot, Lambda's Python runtime calls
every function registered with snapshot_restore_py's register_after_restore,
in the order registered, each with the arguments it was registered with
(``for func, args, kwargs in get_after_restore(): func(*args, **kwargs)``).
The package is pinned in requirements/dev.txt, so the registry the tests read
is the runtime's own."""

from __future__ import annotations

import snapshot_restore_py


def client_hooks() -> list[tuple]:
    """The after-restore functions the client registered (those of its
    modules, idblocks.*); the service's own (idblocks_core) are left to its
    tests: run in-process, they would reseed and empty the layer's caches
    under whatever test comes next."""
    registered = snapshot_restore_py.get_after_restore()
    return [entry for entry in registered if entry[0].__module__.startswith("idblocks.")]


def restore() -> int:
    """Run the client's after-restore functions as the runtime runs them;
    how many ran."""
    hooks = client_hooks()
    for func, args, kwargs in hooks:
        func(*args, **kwargs)
    return len(hooks)
