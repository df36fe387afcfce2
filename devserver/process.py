"""Start and stop `python -m devserver` as a subprocess, as a developer would:
for the tests and the benchmarks."""

from __future__ import annotations

import atexit
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import requests

from localrun.environment import scrubbed_environment
from localrun.template import ROOT

# Every dev server a test started and has not seen end: killed when the test
# process exits, whatever became of the test that started it.
_LIVE: set[subprocess.Popen[str]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_LIVE):
        _stop_process(process, signal.SIGKILL, grace=0)


def _stop_process(process: subprocess.Popen[str], sig: int, grace: float) -> None:
    """As a supervisor stops a service: the signal, a bounded wait, then SIGKILL."""
    try:
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
    finally:
        if process.poll() is not None:
            _LIVE.discard(process)


def subprocess_environment() -> dict[str, str]:
    """This process's environment without the tests' fake AWS settings: the
    dev server sets up its own, as it does for a developer."""
    return scrubbed_environment() | {"PYTHONUNBUFFERED": "1"}


class DevServer:
    def __init__(
        self,
        *args: str,
        state_file: Path | None = None,
        timeout: float = 60.0,
        preexec_fn: Callable[[], object] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: variables added to its environment (its credentials, say)."""
        self.args = ["--port", "0", *args]
        if state_file is not None:
            self.args += ["--state-file", str(state_file)]
        self.timeout = timeout
        self.preexec_fn = preexec_fn
        self.env = dict(env or {})
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self) -> DevServer:
        if not self.try_start():
            raise AssertionError("dev server did not start:\n" + "".join(self.output))
        return self

    def try_start(self) -> bool:
        """Start it; True once it is ready, False if it exited first (its
        output and exit code are then in ``output`` and ``process``)."""
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this project's module, the caller's flags
            [sys.executable, "-m", "devserver", *self.args],
            cwd=ROOT,
            env=subprocess_environment() | self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # preexec_fn only sets signal dispositions, which is safe between fork and exec.
            preexec_fn=self.preexec_fn,
        )
        _LIVE.add(self.process)
        # readline() blocks, so the deadline is kept by a watchdog that kills a
        # server which neither becomes ready nor exits.
        watchdog = threading.Timer(self.timeout, self.process.kill)
        watchdog.start()
        try:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                if line.startswith("ready: "):
                    self.url = line.split()[1]
                    break
        finally:
            watchdog.cancel()
        if not self.url:
            self.process.wait(timeout=30)
            _LIVE.discard(self.process)
            return False
        # Keep draining its log, or a chatty server fills the pipe and blocks.
        self._reader = threading.Thread(target=self._drain, name="devserver-log", daemon=True)
        self._reader.start()
        return True

    def _drain(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 30.0) -> int:
        """Stop it with ``sig`` (SIGTERM, as a supervisor does; SIGINT is
        Ctrl-C) and return its exit code; SIGKILL if it has not gone after
        ``grace`` seconds, which the caller sees as exit code -9."""
        assert self.process is not None
        _stop_process(self.process, sig, grace)
        if self._reader is not None:
            self._reader.join(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

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


def run_devserver(
    *args: str, timeout: float = 60.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run it to completion (for arguments that make it exit); ``env``:
    variables added to its environment."""
    return subprocess.run(  # noqa: S603 - this interpreter, this project's module, the caller's flags
        [sys.executable, "-m", "devserver", *args],
        cwd=ROOT,
        env=subprocess_environment() | dict(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
