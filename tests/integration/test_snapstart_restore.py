"""SnapStart: every environment restored from one snapshot starts from the
same memory. Simulated with fork(): a child of an initialised process is a
copy of its memory, as a restored environment is a copy of the snapshot.
Runs in a fresh interpreter (forking pytest's own process, with its threads,
is unsafe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, os, sys, types

# The Lambda runtime's registry (snapshot_restore_py), as it provides it:
# hooks registered at init, run by the runtime after each restore.
registry = types.ModuleType("snapshot_restore_py")
registry.after_restore = []
registry.register_before_snapshot = lambda func, *a, **k: func
def register_after_restore(func, *args, **kwargs):
    registry.after_restore.append((func, args, kwargs))
    return func
registry.register_after_restore = register_after_restore
sys.modules["snapshot_restore_py"] = registry

sys.path[:0] = [sys.argv[1], sys.argv[2]]
import app  # the whole init: handler module, core, store, clients
from botocore.retries.standard import ExponentialBackoff
from idblocks_core.core import core

taken = []
def reserve_block(name, count, token, replay_window, **_):
    taken.append(token)
    raise SystemExit  # only the token matters here
core().store.reserve_block = reserve_block

import random
# fork() reseeds random in the child (os.register_at_fork); a restore from a
# snapshot does not: each copy starts from the snapshot's generator state.
snapshot_state = random.getstate()

def restored_copy(write_end):
    random.setstate(snapshot_state)
    for func, args, kwargs in registry.after_restore:
        func(*args, **kwargs)
    try:
        core().allocator.take_block("orders", 1)
    except SystemExit:
        pass
    # botocore's retry backoff draws its jitter from the shared random module
    jitter = [ExponentialBackoff().delay_amount(types.SimpleNamespace(attempt_number=n)) for n in (2, 3, 4)]
    os.write(write_end, json.dumps({"token": taken[-1], "jitter": jitter}).encode())
    os._exit(0)

copies = []
for _ in range(2):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        restored_copy(write_end)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        copies.append(json.loads(pipe.read()))
    os.waitpid(pid, 0)
print(json.dumps({"copies": copies, "hooks": len(registry.after_restore)}))
"""


def restore_two_copies() -> dict:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "functions" / "next"), str(ROOT / "layers" / "core")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_restored_copies_draw_different_tokens_and_jitter():
    """Two copies of one initialised next function, each restored the way
    Lambda restores a snapshot (its after-restore hooks run), draw different
    allocation tokens and different retry jitter: the shared random state
    (botocore's jitter) is reseeded by the hook registered at init, and
    tokens are drawn per request, never at init."""
    result = restore_two_copies()
    assert result["hooks"] >= 1, "no after-restore hook registered with the runtime"
    first, second = result["copies"]
    assert first["token"] != second["token"]
    assert first["jitter"] != second["jitter"]
