"""make bench: every benchmark, or those named:
python -m bench [client] [async] [node] [server] [scale] [cost] [gaps] [cached_next]"""

from __future__ import annotations

import sys

from bench import async_client, cached_next, client, cost, gaps, node, scale, server

# cost reads scale's results: it runs after it.
BENCHMARKS = {
    "client": client.main,
    "async": async_client.main,
    "node": node.main,
    "server": server.main,
    "scale": scale.main,
    "cost": cost.main,
    "gaps": gaps.main,
    "cached_next": cached_next.main,
}


def main() -> None:
    wanted = sys.argv[1:] or list(BENCHMARKS)
    unknown = set(wanted) - set(BENCHMARKS)
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {sorted(unknown)}; choose from {sorted(BENCHMARKS)}")
    for name in wanted:
        BENCHMARKS[name]()


if __name__ == "__main__":
    main()
