"""Start and stop `python -m devserver` as a subprocess, as a developer would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from devserver.template import ROOT


class DevServer:
    def __init__(self, *args: str, state_file: Path | None = None, timeout: float = 60.0) -> None:
        self.args = ["--port", "0", *args]
        if state_file is not None:
            self.args += ["--state-file", str(state_file)]
        self.timeout = timeout
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self) -> DevServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devserver", *self.args],
            cwd=ROOT,
            env=env | {"PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + self.timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            if line.startswith("ready: "):
                self.url = line.split()[1]
                # Keep reading what it prints: unread, a pipe holds 64 KiB, and a
                # server that logs more (a fuzzing run's long paths) blocks on it.
                self._reader = threading.Thread(target=self._read_output, daemon=True)
                self._reader.start()
                return self
        self.process.kill()
        raise AssertionError("dev server did not start:\n" + "".join(self.output))

    def stop(self, sig: int = signal.SIGINT) -> int:
        """Stop it like Ctrl-C (or another signal) and return its exit code."""
        assert self.process is not None
        self.process.send_signal(sig)
        if self._reader is None:
            out, _ = self.process.communicate(timeout=30)
            self.output.append(out)
        else:
            self.process.wait(timeout=30)
            self._reader.join(timeout=30)
        return self.process.returncode

    def _read_output(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()

    def post(self, path: str, body: object | None = None, **kwargs) -> requests.Response:
        return requests.post(self.url + path, json=body, timeout=30, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        return requests.get(self.url + path, timeout=30, **kwargs)

    def put(self, path: str, body: object) -> requests.Response:
        return requests.put(self.url + path, json=body, timeout=30)

    def delete(self, path: str) -> requests.Response:
        return requests.delete(self.url + path, timeout=30)


def run_devserver(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run it to completion (for arguments that make it exit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
    return subprocess.run(
        [sys.executable, "-m", "devserver", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
