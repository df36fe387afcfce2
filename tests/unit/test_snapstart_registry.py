"""SnapStart's runtime registry (snapshot_restore_py) outside Lambda. Two
copies restored from one snapshot are in
tests/integration/test_snapstart_restore.py (a fresh interpreter, forked)."""

from __future__ import annotations

import sys


def test_without_the_runtime_registry_nothing_is_registered(monkeypatch):
    """Outside Lambda (the dev server, a deployment without the development
    requirements) snapshot_restore_py is absent: importing the core must not
    fail, and reports that nothing registered."""
    from idblocks_core.core import register_restore_hooks

    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails, as where it is absent
    assert register_restore_hooks() is False
