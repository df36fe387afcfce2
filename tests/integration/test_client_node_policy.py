"""The two clients decide alike: the Node client's BlockSizer, prefetchTail
and smoothedLatency give the Python client's numbers for the same inputs
(random operation sequences, seeded): the sizes asked for with what is
held, the young tail, blocks landing, drain and the start bound on or off
included. So the simulations of bench/gaps.py, which run the Python
policy, say what the Node client does too."""

from __future__ import annotations

import json
import random

from idblocks.sizing import BlockSizer, prefetch_tail, smoothed_latency
from tests.support.node import INDEX, needs_node_client, run_module

pytestmark = needs_node_client()

# Replays the operations in Node and prints what each returned.
NODE_REPLAY = """
import { readFileSync } from "node:fs";
const idblocks = await import(process.argv[1]);
const cases = JSON.parse(readFileSync(0, "utf8"));
const out = cases.map(({ sizer, ops, tails }) => {
  const s = new idblocks.BlockSizer(...sizer.slice(0, 6), { boundedStart: sizer[6] });
  const sizes = ops.map(([op, ...args]) => {
    if (op === "observe") s.observe(...args);
    else if (op === "contended") s.contended(...args);
    else if (op === "cap") s.cap(...args);
    else if (op === "landed") s.landed(...args);
    else if (op === "drain") s.drain();
    else if (op === "demandFrom") s.demandFrom(...args);
    else if (op === "firstRate") s.firstRate(...args);
    const tail = s.youngTail();
    return [s.nextSize(op === "held" ? args[0] : 0), s.currentRunway, s.rate, tail, s.bounded, s.draining];
  });
  const tailed = tails.map((args) => idblocks.prefetchTail(...args));
  let latency = null;
  const latencies = tails.map(([, , , seconds]) => (latency = idblocks.smoothedLatency(latency, seconds)));
  return { sizes, tailed, latencies };
});
console.log(JSON.stringify(out));
"""


def random_case(rng: random.Random) -> dict:
    minimum = rng.randint(1, 50)
    initial = rng.randint(minimum, 500)
    maximum = rng.randint(initial, 2_000_000)
    runway = rng.choice([0.5, 1.0, 5.0, 7.3])
    sizer = [initial, minimum, maximum, runway, 8.0, runway * rng.choice([1, 4, 60]), rng.random() < 0.8]
    ops = []
    if rng.random() < 0.5:  # drained before a block ran out: no rate yet
        ops += [["demandFrom", rng.random() * 100], ["drain"], ["firstRate", rng.randint(0, 100_000), 150.0]]
    for _ in range(40):
        kind = rng.random()
        if kind < 0.4:
            ops.append(["observe", rng.randint(0, 1_000_000), rng.choice([0.0, 1e-7, rng.random() * 10])])
        elif kind < 0.5:
            ops.append(["contended", rng.choice([0, 0, 0, rng.randint(1, 5)])])
        elif kind < 0.55:
            ops.append(["cap", rng.randint(1, 2_000_000)])
        elif kind < 0.75:
            ops.append(["landed", rng.randint(1, 100_000)])
        elif kind < 0.9:
            ops.append(["held", rng.randint(0, 50_000)])
        elif kind < 0.93:
            ops.append(["demandFrom", rng.random() * 100])
        elif kind < 0.96:
            ops.append(["firstRate", rng.randint(0, 100_000), 100 + rng.random() * 100])
        else:
            ops.append(["drain"])
    tails = [
        [
            rng.randint(1, 1_000_000),
            rng.random(),
            rng.choice([None, rng.random() * 1e6]),
            rng.random() * 0.2,
            rng.choice([None, rng.randint(1, 100_000)]),
        ]
        for _ in range(20)
    ]
    return {"sizer": sizer, "ops": ops, "tails": tails}


def python_replay(case: dict) -> dict:
    sizer = BlockSizer(*case["sizer"][:5], max_runway=case["sizer"][5], bounded_start=case["sizer"][6])
    sizes = []
    python_names = {"demandFrom": "demand_from", "firstRate": "first_rate"}
    for op, *args in case["ops"]:
        if op != "held":
            getattr(sizer, python_names.get(op, op))(*args)
        tail = sizer.young_tail()
        held = args[0] if op == "held" else 0
        sizes.append(
            [sizer.next_size(held), sizer.current_runway, sizer.rate, tail, sizer.bounded, sizer.draining]
        )
    tailed = [prefetch_tail(*args) for args in case["tails"]]
    latency, latencies = None, []
    for _, _, _, seconds, _ in case["tails"]:
        latency = smoothed_latency(latency, seconds)
        latencies.append(latency)
    return {"sizes": sizes, "tailed": tailed, "latencies": latencies}


def test_block_sizes_prefetch_points_and_latency_are_the_python_clients():
    rng = random.Random(20261123)
    cases = [random_case(rng) for _ in range(200)]
    done = run_module(NODE_REPLAY, str(INDEX), stdin=json.dumps(cases), timeout=120)
    from_node = json.loads(done.stdout)
    for case, got in zip(cases, from_node, strict=True):
        assert got == python_replay(case), case
