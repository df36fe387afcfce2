"""The embedded tables' contents, kept in a file between runs of the dev server.

A counter service whose local copy starts again from 1 hands out the same IDs
twice in a developer's data; so the state is written after every request that
changed it, before the response goes out, and atomically (a temporary file,
fsync, rename), so a crash leaves either the old state or the new one. A file
that cannot be read is an error, never silently replaced. Starting with
--fresh first copies the state it is about to replace to a backup beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

FORMAT = "idblocks-dev-state"
VERSION = 1


class StateError(Exception):
    """The state file exists but cannot be used; the message says what to do."""


class StateFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._last_written: str | None = None

    def load(self) -> dict[str, list[dict[str, Any]]] | None:
        """The saved tables by logical id, or None when there is no file yet."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read state file {self.path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        tables = data.get("tables") if isinstance(data, dict) else None
        if not (
            isinstance(data, dict)
            and data.get("format") == FORMAT
            and data.get("version") == VERSION
            and isinstance(tables, dict)
            and all(isinstance(items, list) for items in tables.values())
        ):
            raise StateError(
                f"state file {self.path} is not a valid idblocks dev state; it was left as it is. "
                "Move it away, or start with --fresh to ignore it (it is then replaced)"
            )
        self._last_written = _serialise(tables)
        return tables

    def backup(self, now: float | None = None) -> Path | None:
        """Copy the state file to ``<name>.bak-<UTC time>`` beside it, before
        --fresh replaces it; returns the copy's path, or None when there is no
        state file. The copy is taken whatever the file holds (even one that
        cannot be read as state): it is the developer's data."""
        if not self.path.is_file():
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        for attempt in range(100):
            suffix = f".bak-{stamp}" + (f"-{attempt}" if attempt else "")
            target = self.path.with_name(self.path.name + suffix)
            try:
                # O_EXCL: two fresh starts in one second never overwrite each other's backup.
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            try:
                with os.fdopen(fd, "wb") as out, self.path.open("rb") as source:
                    shutil.copyfileobj(source, out)
                    out.flush()
                    os.fsync(out.fileno())
            except BaseException:
                target.unlink(missing_ok=True)
                raise
            return target
        raise StateError(f"cannot find a free backup name for {self.path} (.bak-{stamp}-N)")

    def save(self, tables: dict[str, list[dict[str, Any]]]) -> bool:
        """Write the tables if they changed since the last write; True if written."""
        text = _serialise(tables)
        if text == self._last_written:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._last_written = text
        return True


def _serialise(tables: dict[str, list[dict[str, Any]]]) -> str:
    ordered = {
        name: sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
        for name, items in tables.items()
    }
    document = {"format": FORMAT, "version": VERSION, "tables": ordered}
    return json.dumps(document, sort_keys=True, indent=1) + "\n"
