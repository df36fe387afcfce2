"""Lambda SnapStart and the client, across processes: two environments
restored from one snapshot of a handler's init, each in a process of its own,
never hand out the same ID, and a block request caught on its way out at the
snapshot sends nothing from either. In-process checks of the restore hook
are in tests/unit/test_client_snapstart.py.

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

from tests.support.proxy import LossyProxy

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="copies the process with libc's fork()")

# What every script here starts with: how it makes its restored copies.
# ``restored_copies(restored_copy)`` copies the process twice, one copy after
# the other; each runs the after-restore functions as the runtime does, then
# ``restored_copy()``, whose JSON report (None if the copy failed) it returns.
RESTORED_COPIES = """
import ctypes, json, os

import snapshot_restore_py


def restored_copies(restored_copy):
    libc = ctypes.PyDLL(None)
    copies = []
    for _ in range(2):
        read_end, write_end = os.pipe()
        pid = libc.fork()
        if pid == 0:
            os.close(read_end)
            try:
                for func, args, kwargs in snapshot_restore_py.get_after_restore():  # as the runtime runs them
                    func(*args, **kwargs)
                os.write(write_end, json.dumps(restored_copy()).encode())
                os._exit(0)
            finally:
                os._exit(1)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            copies.append(json.loads(pipe.read() or "null"))
        os.waitpid(pid, 0)
    return copies
"""

SNAPSHOT = (
    RESTORED_COPIES
    + """
import asyncio, contextlib, sys

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
def restored_copy():
    ids = [orders.next_id() for _ in range(150)]
    ids += [invoices.next_id() for _ in range(5)]
    ids += asyncio.run(draw(tasks, 150))
    return {
        "pid": os.getpid(),
        "ids": ids,
        "sent": shared.sent[len(snapshot_keys):],
        "jitter": [backend.retry.rng.random() for backend in backends],
    }


copies = restored_copies(restored_copy)
print(json.dumps({"pid": os.getpid(), "handed": handed, "snapshot_keys": snapshot_keys, "copies": copies}))
"""
)


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


# A block request caught at the snapshot on its way out, in an event loop
# kept across invocations (as docs/client.md allows): waiting for its SigV4
# signature (IamAuth signs in a worker thread; a role's credentials are slow
# to come the first time), or for the host's address (httpx resolves it in a
# worker thread). The snapshot is taken once that wait is over but before the
# loop has run again: the request's next step is queued on the loop, as it is
# when a worker thread finishes between two invocations. Each restored copy
# then runs the loop, as its first invocation does.
SUSPENDED = (
    RESTORED_COPIES
    + """
import asyncio, socket, sys, threading
from concurrent.futures import ThreadPoolExecutor

import botocore.session
from idblocks import IamAuth, ServiceUnavailable
from idblocks.async_backend import AsyncHttpBackend

where, url, counter, key = sys.argv[1:5]
inside, release = threading.Event(), threading.Event()


def wait_once():
    if not inside.is_set():
        inside.set()
        assert release.wait(60)


if where == "signing":
    class FirstSignatureWaits(IamAuth):
        def headers(self, method, url, body):
            wait_once()
            return super().headers(method, url, body)

    session = botocore.session.Session()
    session.set_credentials("AKIASNAPSHOTTEST0001", "snapshot-test-secret")
    backend = AsyncHttpBackend(url, auth=FirstSignatureWaits(region="eu-west-1", session=session))
else:  # resolving: a host name only this process knows, slow to resolve the first time
    host, port = url.removeprefix("http://").split(":")
    resolve = socket.getaddrinfo

    def slow_first(name, *args, **kwargs):
        if name in ("restored.invalid", b"restored.invalid"):  # anyio passes it encoded
            wait_once()
            name = host
        return resolve(name, *args, **kwargs)

    socket.getaddrinfo = slow_first
    backend = AsyncHttpBackend(f"http://restored.invalid:{port}")

loop = asyncio.new_event_loop()
workers = ThreadPoolExecutor(1)  # where the signature, or the address, is worked out
loop.set_default_executor(workers)
request = loop.create_task(backend.allocate(counter, 10, idempotency_key=key))
with ThreadPoolExecutor(1) as waiter:
    loop.run_until_complete(loop.run_in_executor(waiter, inside.wait, 60))
# The invocation is over: the loop stops with the request waiting. The wait
# ends; its answer is queued on the loop when the worker has finished.
release.set()
workers.shutdown(wait=True)


def restored_copy():
    loop.set_default_executor(ThreadPoolExecutor(1))  # the snapshot's worker thread is not in the copy
    try:
        block = loop.run_until_complete(request)
        caught = {"ids": [block.start, block.end]}
    except ServiceUnavailable as exc:
        caught = {"refused": str(exc)}
    fresh = loop.run_until_complete(backend.allocate(counter, 10))
    return {"pid": os.getpid(), "caught": caught, "fresh": [fresh.start, fresh.end]}


print(json.dumps({"copies": restored_copies(restored_copy)}))
"""
)


def ids_of(span: list[int] | None) -> set[int]:
    return set() if span is None else set(range(span[0], span[1] + 1))


@pytest.mark.parametrize("where", ["signing", "resolving"])
def test_a_request_waiting_to_be_signed_or_resolved_at_the_snapshot_sends_nothing_after_it(dev, where):
    """Given an AsyncHttpBackend's keyed block request waiting at the
    snapshot, in a loop kept across invocations, for its SigV4 signature or
    for its host's address, when two copies are restored and each runs the
    loop on, then in each the request fails as begun before the restore, the
    service never receives its key, and the blocks each copy then takes are
    its own. (Sent after the restore, each copy was answered the one block
    the key names: both handed out ID 1.)"""
    counter, key = f"restored-{where}", f"at-the-snapshot-{where}"
    with LossyProxy(dev.url) as proxy:
        result = run(SUSPENDED, where, proxy.url, counter, key)
        received = list(proxy.keys)
    first, second = result["copies"]
    assert first is not None, "the first copy failed"
    assert second is not None, "the second copy failed"
    assert key not in received, "the key drawn before the snapshot reached the service after the restore"
    for copy in (first, second):
        assert "before a restore" in copy["caught"].get("refused", ""), copy["caught"]
    first_ids = ids_of(first["caught"].get("ids")) | ids_of(first["fresh"])
    second_ids = ids_of(second["caught"].get("ids")) | ids_of(second["fresh"])
    assert not first_ids & second_ids, "two copies of one snapshot hold the same IDs"


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
