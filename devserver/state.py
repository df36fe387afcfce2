"""The embedded tables' contents, kept in a file between runs of the dev server.

A counter service whose local copy starts again from 1 hands out the same IDs
twice in a developer's data; so the state is written after every request that
changed it, before the response goes out, and atomically (a temporary file,
fsync, rename), so a crash leaves either the old state or the new one. A file
that cannot be read is an error, never silently replaced. Starting with
--fresh first copies the state it is about to replace to a backup beside it.

Beside the state file the dev server also keeps the key pair it makes for a
developer with no credentials (ClientAuth AWS_IAM), so the pair exported once
keeps working after a restart; --fresh leaves it (it empties the tables, and
the pair is the developer's shell's, not the tables').
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
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


# -- the key pair the dev server makes for a developer with none ---------------

_KEY_FILE_HEADER = (
    "# The key pair the idblocks dev server made (ClientAuth AWS_IAM, no credentials of your own).\n"
    "# It signs requests to the dev server only. Delete this file for a new pair.\n"
)


def kept_key_pair(path: Path, make: Callable[[], tuple[str, str]]) -> tuple[tuple[str, str], bool]:
    """The key pair kept in ``path`` (an AWS shared-credentials file, its
    default profile), or one from ``make``, kept there first; and whether it
    was made now. The file is the owner's alone (0600): it holds a secret.
    Two servers starting at once keep one pair: the file appears whole
    (written aside, then linked into place) or not at all."""
    try:
        return _read_key_pair(path), False
    except FileNotFoundError:
        pass
    access_key, secret_key = make()
    text = (
        f"{_KEY_FILE_HEADER}[default]\naws_access_key_id = {access_key}\n"
        f"aws_secret_access_key = {secret_key}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp makes the file 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.link(tmp, path)
    except FileExistsError:
        return _read_key_pair(path), False
    except OSError as exc:
        raise StateError(f"cannot keep the dev server's key pair in {path}: {exc.strerror or exc}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return (access_key, secret_key), True


def _read_key_pair(path: Path) -> tuple[str, str]:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        mode = path.stat().st_mode
        parser.read_string(path.read_text(), source=str(path))
    except FileNotFoundError:
        raise
    except (OSError, configparser.Error, UnicodeDecodeError) as exc:
        raise StateError(
            f"cannot read the dev server's key pair in {path} ({exc}): delete the file for a new pair"
        ) from None
    profile = parser["default"] if parser.has_section("default") else {}
    access_key, secret_key = profile.get("aws_access_key_id"), profile.get("aws_secret_access_key")
    if not access_key or not secret_key:
        raise StateError(
            f"{path} holds no key pair (aws_access_key_id and aws_secret_access_key under [default]): "
            "delete the file for a new pair"
        )
    if mode & 0o077:
        # Readable by others (copied, or unpacked from an archive): the owner's alone again.
        path.chmod(0o600)
    return access_key, secret_key
