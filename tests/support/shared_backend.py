"""A block backend that forked processes can share: one SQLite file holds the
counter, every block taken and the Idempotency-Keys, and each allocation is
one write transaction, so processes never get overlapping blocks. Faults are
injected per process, as with MemoryBackend.fail_next."""

from __future__ import annotations

import collections
import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from idblocks.block import Block
from idblocks.errors import ServiceUnavailable
from idblocks.testing import LOST_RESPONSE, UNAVAILABLE


class SharedBackend:
    def __init__(self, path: Path, *, start: int = 1) -> None:
        self.path = str(path)
        self._faults: collections.deque[str] = collections.deque()
        self._fault_lock = threading.Lock()
        with contextlib.closing(self._connect()) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS counter (next INTEGER NOT NULL)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS blocks"
                " (key TEXT PRIMARY KEY, count INTEGER, start INTEGER, end INTEGER, pid INTEGER)"
            )
            if db.execute("SELECT COUNT(*) FROM counter").fetchone()[0] == 0:
                db.execute("INSERT INTO counter VALUES (?)", (start,))

    def _connect(self) -> sqlite3.Connection:
        # A connection per call: none is carried across a fork.
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA synchronous=OFF")  # a test file: no need to survive a power cut
        return db

    def fail_next(self, times: int = 1, kind: str = UNAVAILABLE) -> None:
        with self._fault_lock:
            self._faults.extend([kind] * times)

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        with self._fault_lock:
            fault = self._faults.popleft() if self._faults else None
        if fault == UNAVAILABLE:
            raise ServiceUnavailable("injected: service unavailable")
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT count, start, end FROM blocks WHERE key = ?", (idempotency_key,)
            ).fetchone()
            if row is not None:
                if row[0] != count:
                    raise AssertionError(f"key {idempotency_key} reused with count {count}, first {row[0]}")
                block = Block(row[1], row[2])
            else:
                (start,) = db.execute("SELECT next FROM counter").fetchone()
                block = Block(start, start + count - 1)
                db.execute("UPDATE counter SET next = ?", (start + count,))
                db.execute(
                    "INSERT INTO blocks VALUES (?, ?, ?, ?, ?)",
                    (idempotency_key, count, block.start, block.end, os.getpid()),
                )
            db.execute("COMMIT")
        finally:
            db.close()
        if fault == LOST_RESPONSE:
            raise ServiceUnavailable("injected: the response was lost")
        return block

    def blocks(self) -> list[Block]:
        """Every block taken, by every process, in order."""
        with contextlib.closing(self._connect()) as db:
            rows = db.execute("SELECT start, end FROM blocks ORDER BY start").fetchall()
        return [Block(start, end) for start, end in rows]

    def handed_out(self) -> int:
        return sum(map(len, self.blocks()))
