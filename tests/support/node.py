"""The Node client (client-node/) as the tests run it: whether it is built,
the node binary, its compiled node:test files and ES-module snippets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from localrun.environment import scrubbed_environment
from localrun.template import ROOT

NODE_DIR = ROOT / "client-node"
INDEX = NODE_DIR / "dist" / "src" / "index.js"


def needs_node_client(built: Path = INDEX) -> pytest.MarkDecorator:
    """Skip unless ``built`` (a file tsc writes to client-node/dist) exists;
    never under IDBLOCKS_REQUIRE_BUILD (make test), where a missing build
    fails instead."""
    return pytest.mark.skipif(
        not built.exists() and not os.environ.get("IDBLOCKS_REQUIRE_BUILD"),
        reason="the Node client is not built: make node (make test does)",
    )


def node_binary() -> str:
    node = shutil.which("node")
    assert node, "node not found: the Node client needs Node.js 20 or later (make node checks it)"
    return node


def run_node_tests(tests: Path, env: dict[str, str], passed: int) -> None:
    """``node --test tests`` in client-node/ with ``env`` (and no AWS
    settings of the developer's): it succeeds, and ``passed`` tests pass,
    none fails or is skipped."""
    done = subprocess.run(
        [node_binary(), "--test", str(tests)],
        cwd=NODE_DIR,
        env=scrubbed_environment() | env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    counts = {
        key: int(value) for key, value in re.findall(r"^# (pass|fail|skipped) (\d+)$", done.stdout, re.M)
    }
    assert counts == {"pass": passed, "fail": 0, "skipped": 0}, done.stdout[-3000:]


def run_module(
    script: str,
    *args: str,
    timeout: float,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``script`` run by node as an ES module (top-level await, import()),
    ``args`` its process.argv[1:]."""
    return subprocess.run(
        [node_binary(), "--input-type=module", "-e", script, *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
