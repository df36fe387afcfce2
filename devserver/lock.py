"""One dev server per state file.

Two dev servers that load and save the same state file each count on from
what they loaded, and hand out the same IDs; whichever saves last then wins.
So the state file has one owner: a server holds an exclusive ``flock`` on
``<state file>.lock`` from before it reads the state until it exits. The kernel
drops the lock when the process ends, however it ends (SIGKILL, a crash), so a
lock is never left behind and there is no stale-pid guessing.

fcntl.flock rather than a library: the owner writes its pid and port into the
lock file it holds, for the refusal message to name, and locking libraries
truncate the lock file when they open it, which would wipe that note. The lock
belongs to the open file description, which is not inherited by subprocesses
(Python opens files non-inheritable) and which the dev server never forks with.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path


class StateInUse(Exception):
    """Another live dev server owns this state file."""

    def __init__(self, state_path: Path, owner: dict[str, object]) -> None:
        self.state_path = state_path
        self.owner = owner
        port, pid = owner.get("port"), owner.get("pid")
        who = f"port {port}" if port is not None else "still starting"
        if pid is not None:
            who += f", pid {pid}"
        super().__init__(
            f"{state_path} is in use by another dev server ({who}); stop that one, "
            "or give this one its own state with --state-file PATH"
        )


class StateLock:
    def __init__(self, state_path: Path) -> None:
        self.state_path = state_path
        # Resolved, so two spellings of one state file (relative, symlinked) meet at one lock.
        self.path = state_path.resolve().with_name(state_path.resolve().name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> StateLock:
        """Take the lock at once or raise StateInUse; never waits."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # No O_TRUNC: a server that is refused must not wipe the owner's note.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_note(fd)
            os.close(fd)
            raise StateInUse(self.state_path, owner) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.note(pid=os.getpid())
        return self

    def note(self, **facts: object) -> None:
        """Record who holds the lock (pid, port), for a refused server to report."""
        if self._fd is None:
            raise RuntimeError("the state lock is not held")
        text = json.dumps(facts, sort_keys=True).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text, 0)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> StateLock:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def _read_note(fd: int) -> dict[str, object]:
    # The owner may be between truncating and writing its note: an empty or
    # partial note only makes the message less specific.
    try:
        note = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}
