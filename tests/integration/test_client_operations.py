"""The operations table of docs/client.md against the Node client as built:
its HttpBackend's methods, up the prototype chain, are the ones the table
names (scripts.docs_tables.NODE_METHODS), no more and no fewer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from localrun.template import ROOT
from scripts import docs_tables

NODE_DIR = ROOT / "client-node"
INDEX = NODE_DIR / "dist" / "src" / "index.js"

pytestmark = pytest.mark.skipif(
    not INDEX.exists() and not os.environ.get("IDBLOCKS_REQUIRE_BUILD"),
    reason="the Node client is not built: make node (make test does)",
)

METHODS = """
import(process.argv[1]).then((client) => {
  const names = new Set();
  for (let p = client.HttpBackend.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name !== "constructor" && typeof Object.getOwnPropertyDescriptor(p, name).value === "function") {
        names.add(name);
      }
    }
  }
  console.log(JSON.stringify([...names]));
});
"""


def test_the_node_backends_methods_are_the_tables():
    node = shutil.which("node")
    assert node, "node not found: the Node client needs Node.js 20 or later (make node checks it)"
    done = subprocess.run(
        [node, "--input-type=module", "-e", METHODS, INDEX.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    methods = set(json.loads(done.stdout))
    assert methods == {name for name in docs_tables.NODE_METHODS.values() if name}
