"""Lambda SnapStart and the client, across processes: two environments
restored from one snapshot of a handler's init, each in a process of its own,
never hand out the same ID. In-process checks of the restore hook are in
tests/unit/test_client_snapstart.py.

How a restore is simulated, and why not with os.fork(): os.fork() runs the
client's own at-fork handlers in the child, which drop what the parent held
(they would hide a restore hook that does nothing), and CPython's (which
reseed ``random``). A restored environment runs neither: it starts from the
snapshot's memory as it was, and then the runtime runs the functions
registered with snapshot_restore_py. So each copy here is made by libc's
fork() called through ctypes, which copies the process and runs no Python
handler at all (PyDLL keeps the GIL held across the call, so the copy's one
thread holds it), and then runs snapshot_restore_py's after-restore
functions as the runtime runs them. The copy's threads are gone, as they are
not in a restored environment: the snapshot is taken with none of the
client's threads at work (nothing is prefetching), and a thread that lives
on through a restore is the unit tests' case. Each test runs in a fresh
interpreter: copying pytest's own process, with its threads, is unsafe."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="copies the process with libc's fork()")

SNAPSHOT = """
import asyncio, contextlib, ctypes, json, os, sys

import snapshot_restore_py
from idblocks import AsyncSequence, HttpBackend, Sequence, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend
from idblocks.testing import LOST_RESPONSE
from tests.support.shared_backend import SharedBackend


class Keyed(SharedBackend):
    # Every key this process sends, in order.
    sent = []

    def allocate(self, counter, count, *, idempotency_key):
        self.sent.append(idempotency_key)
        return super().allocate(counter, count, idempotency_key=idempotency_key)


class AsyncKeyed:
    def __init__(self, shared):
        self.shared = shared

    async def allocate(self, counter, count, *, idempotency_key):
        return await asyncio.to_thread(self.shared.allocate, counter, count, idempotency_key=idempotency_key)


async def draw(seq, count):
    return [await seq.next_id() for _ in range(count)]


# -- init: a handler module, as the docs build it, drawing a few IDs ----------
shared = Keyed(sys.argv[1])
orders = Sequence(shared, "orders")
handed = [orders.next_id() for _ in range(3)]
invoices = Sequence(shared, "invoices", prefetch=False)
shared.fail_next(1, LOST_RESPONSE)
with contextlib.suppress(ServiceUnavailable):
    invoices.next_id()  # its block is taken, the answer lost: pending, with its key
tasks = AsyncSequence(AsyncKeyed(shared), "tasks")
handed += asyncio.run(draw(tasks, 3))
backends = [HttpBackend("http://127.0.0.1:9"), AsyncHttpBackend("http://127.0.0.1:9")]
snapshot_keys = list(shared.sent)

# -- the snapshot, restored twice -----------------------------------------------
libc = ctypes.PyDLL(None)


def restored_copy(write_end):
    for func, args, kwargs in snapshot_restore_py.get_after_restore():  # as the runtime runs them
        func(*args, **kwargs)
    ids = [orders.next_id() for _ in range(150)]
    ids += [invoices.next_id() for _ in range(5)]
    ids += asyncio.run(draw(tasks, 150))
    report = {
        "pid": os.getpid(),
        "ids": ids,
        "sent": shared.sent[len(snapshot_keys):],
        "jitter": [backend.retry.rng.random() for backend in backends],
    }
    os.write(write_end, json.dumps(report).encode())
    os._exit(0)


copies = []
for _ in range(2):
    read_end, write_end = os.pipe()
    pid = libc.fork()
    if pid == 0:
        os.close(read_end)
        try:
            restored_copy(write_end)
        finally:
            os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        copies.append(json.loads(pipe.read() or "null"))
    os.waitpid(pid, 0)
print(json.dumps({"pid": os.getpid(), "handed": handed, "snapshot_keys": snapshot_keys, "copies": copies}))
"""


def run(script: str, *args: str) -> dict:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_environments_restored_from_one_snapshot_draw_disjoint_ids(tmp_path):
    """Given a handler's init that drew from a Sequence and an AsyncSequence
    and left a keyed block request unanswered, when the snapshot is restored
    twice, then each copy hands out only IDs of blocks it took itself after
    the restore, with keys of its own, so the two never share an ID; and
    their retry jitter differs."""
    result = run(SNAPSHOT, str(tmp_path / "ids.db"))
    first, second = result["copies"]
    assert first is not None, "the first copy failed"
    assert second is not None, "the second copy failed"
    taken_by: dict[int, set[int]] = {}  # the IDs of the blocks each process took
    with contextlib.closing(sqlite3.connect(tmp_path / "ids.db")) as db:
        for start, end, pid in db.execute("SELECT start, end, pid FROM blocks"):
            taken_by.setdefault(pid, set()).update(range(start, end + 1))
    for copy in (first, second):
        assert len(set(copy["ids"])) == len(copy["ids"])
        assert not set(copy["ids"]) & set(result["handed"])
        assert set(copy["ids"]) <= taken_by[copy["pid"]], "a copy handed out IDs the snapshot held"
        assert not set(copy["sent"]) & set(result["snapshot_keys"]), "a copy sent a key of the snapshot's"
    assert not set(first["ids"]) & set(second["ids"])
    kinds = ["HttpBackend", "AsyncHttpBackend"]
    for kind, one, other in zip(kinds, first["jitter"], second["jitter"], strict=True):
        assert one != other, f"the copies' {kind}s retry in step"


IMPORT = """
import json, sys
if sys.argv[1] == "absent":
    sys.modules["snapshot_restore_py"] = None  # import fails, as outside Lambda
before = set(sys.modules)
import idblocks, idblocks.async_backend
from idblocks import Sequence
from idblocks.testing import MemoryBackend

seq = Sequence(MemoryBackend(), "orders")
ids = [seq.next_id() for _ in range(4)]
seq.close()
registry = sys.modules.get("snapshot_restore_py")
hooks = registry and registry.get_after_restore()
print(json.dumps({
    "modules": sorted(set(sys.modules) - before),
    "after_restore": registry and [f"{func.__module__}.{func.__qualname__}" for func, _, _ in hooks],
    "before_snapshot": registry and len(registry.get_before_snapshot()),
    "ids": ids,
    "restores": getattr(sys.modules.get("idblocks.snapstart"), "restores", 0),
}))
"""


def test_importing_the_client_outside_lambda_changes_nothing():
    """Without snapshot_restore_py, the client imports and works as before and
    registers nothing. With it but no runtime to restore (a developer's
    machine), it registers one after-restore function and nothing before a
    snapshot; that function never runs, and nothing else is imported or
    changed: a Sequence draws as it always did."""
    absent, present = run(IMPORT, "absent"), run(IMPORT, "present")
    assert absent["after_restore"] is None
    assert present["after_restore"] == ["idblocks.snapstart.after_restore"]
    assert present["before_snapshot"] == 0
    assert set(present["modules"]) - set(absent["modules"]) == {"snapshot_restore_py"}
    assert absent["ids"] == present["ids"] == [1, 2, 3, 4]
    assert absent["restores"] == present["restores"] == 0
