"""make bench: every benchmark, or those named: python -m bench [client] [async] [server] [scale]"""

from __future__ import annotations

import sys

from bench import async_client, client, scale, server

BENCHMARKS = {
    "client": client.main,
    "async": async_client.main,
    "server": server.main,
    "scale": scale.main,
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
