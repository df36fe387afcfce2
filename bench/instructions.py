"""Instructions per warm request, counted by valgrind's callgrind: each
route's handler as deployed and the bare handler beside it, as
bench/server.py runs them (bench/lambda_child.py, modes warm and bare).
Each is run twice, with the same DynamoDB stub and FEW and MANY requests;
the difference over MANY - FEW is what one request executes, the start-up
and the stub's set-up left out.

    python -m bench.instructions [next] [batch] [admin] [--layer DIR]

Needs valgrind and `make build` (the layer is bench/server.py's, from the
build; --layer measures another, e.g. one built from an earlier commit).
Not part of `make bench`: a few minutes a route. Instructions are not time
(a system call or a cache miss costs none), but they do not change with the
machine's load: where a change removes work, they show it to within a few
hundred, where a busy machine's timings cannot. Writes
bench/results/instructions.json.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from bench.common import machine_facts, write_results
from bench.server import BUILD, EVENTS, FUNCTIONS, ROOT, child_run, local_layer

FEW, MANY = 100, 600


def instructions(child_args: list[str], cwd: Path) -> int:
    """What one run of bench.lambda_child executes, as callgrind counts it."""
    with tempfile.TemporaryDirectory() as scratch:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out"]
        done = child_run(child_args, cwd, prefix=valgrind)
    collected = re.search(r"Collected : (\d+)", done.stderr)
    if collected is None:
        raise RuntimeError(f"valgrind counted nothing:\n{done.stderr[-3000:]}")
    return int(collected.group(1))


def per_request(args: list[str], cwd: Path) -> float:
    stubs = str(MANY + 1)
    few = instructions([*args, str(FEW), stubs], cwd)
    many = instructions([*args, str(MANY), stubs], cwd)
    return (many - few) / (MANY - FEW)


def main(routes: list[str], layer: Path) -> dict[str, object]:
    shown = layer.relative_to(ROOT) if layer.is_relative_to(ROOT) else layer
    results: dict[str, object] = dict(machine_facts()) | {"layer": str(shown)}
    for route in routes:
        fn = BUILD / FUNCTIONS[route]
        event = str(ROOT / "events" / f"{EVENTS[route]}.json")
        ours = per_request(["warm", str(fn), str(layer), route, event], fn)
        bare = per_request(["bare", str(layer), route, event], fn)
        results |= {
            f"instructions_per_request_{route}": round(ours),
            f"instructions_per_request_bare_{route}": round(bare),
            f"instructions_ratio_{route}": round(ours / bare, 3),
        }
        line = f"{route}: {ours:,.0f} a request, bare handler {bare:,.0f}: {ours / bare:.3f}"
        print(f"instructions: {line}", flush=True)
    write_results("instructions", results)
    return results


if __name__ == "__main__":
    arguments = sys.argv[1:]
    chosen = Path(arguments.pop(arguments.index("--layer") + 1)) if "--layer" in arguments else None
    wanted = [a for a in arguments if a != "--layer"] or list(FUNCTIONS)
    main(wanted, chosen or local_layer())
