"""The Node client (client-node/) against the dev server, lost answers
included: the Node tests in client-node/test/devserver run with the URLs of
a dev server and of a proxy in front of it that loses responses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.proxy import LossyProxy

NODE_DIR = ROOT / "client-node"
TESTS = NODE_DIR / "dist" / "test" / "devserver" / "service.test.js"

pytestmark = pytest.mark.skipif(
    not TESTS.exists() and not os.environ.get("IDBLOCKS_REQUIRE_BUILD"),
    reason="the Node client is not built: make node (make test does)",
)


def run_node_tests(env: dict[str, str]) -> dict[str, int]:
    node = shutil.which("node")
    assert node, "node not found: the Node client needs Node.js 20 or later (make node checks it)"
    done = subprocess.run(
        [node, "--test", str(TESTS)],
        cwd=NODE_DIR,
        env=scrubbed_environment() | env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    return {key: int(value) for key, value in re.findall(r"^# (pass|fail|skipped) (\d+)$", done.stdout, re.M)}


def test_the_node_client_over_http_with_lost_answers(dev):
    with LossyProxy(dev.url) as proxy:
        # The first three block requests through the proxy are applied, then their answers lost.
        proxy.lose = 3
        counts = run_node_tests({"IDBLOCKS_URL": dev.url, "IDBLOCKS_LOSSY_URL": proxy.url})
    assert counts == {"pass": 5, "fail": 0, "skipped": 0}
    assert proxy.lost == [("POST", "/counters/node-lossy/batch", 200)] * 3
    # Each lost answer was asked again with its key: 200 IDs drawn in blocks of 20, no block burned.
    assert dev.get("/admin/counters/node-lossy").json()["next"] <= 200 + 20 + 1
