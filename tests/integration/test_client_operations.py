"""The operations table of docs/client.md against the Node client as built:
its HttpBackend's methods, up the prototype chain, are the ones the table
names (scripts.docs_tables.NODE_METHODS), no more and no fewer."""

from __future__ import annotations

import json

from scripts import docs_tables
from tests.support.node import INDEX, needs_node_client, run_module

pytestmark = needs_node_client()

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
    done = run_module(METHODS, INDEX.as_uri(), timeout=60)
    methods = set(json.loads(done.stdout))
    assert methods == {name for name in docs_tables.NODE_METHODS.values() if name}
