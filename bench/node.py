"""The Node client's benchmarks, run by node from client-node/dist/bench
(`make bench` compiles it first): next() IDs/s as a ratio to a bare counter
behind the same await, and the latency of `await seq.next()` while block
requests take 50 ms. All measured side by side in one node process.

    python -m bench node      (make bench runs all benchmarks)

Writes bench/results/node.json (a flat object).
"""

from __future__ import annotations

import json
import shutil
import subprocess

from bench.common import machine_facts, write_results
from localrun.template import ROOT

NODE_DIR = ROOT / "client-node"
SCRIPT = NODE_DIR / "dist" / "bench" / "bench.js"


def main() -> None:
    node = shutil.which("node")
    if node is None or not SCRIPT.exists():
        raise SystemExit("the Node client is not built: run `make node` (make bench does)")
    done = subprocess.run([node, str(SCRIPT)], cwd=NODE_DIR, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    # The GIL says nothing about a node process.
    results = {key: value for key, value in machine_facts().items() if key != "gil"} | figures
    write_results("node", results)
    print(
        f"node {figures['node']}: await seq.next() {figures['rate_sequence_ids_per_s']:,} IDs/s, "
        f"{figures['rate_ratio']}x a bare counter behind the same await; "
        f"p99.9 {figures['stall_p999_us']} us while refills take {figures['stall_latency_ms']} ms",
        flush=True,
    )


if __name__ == "__main__":
    main()
