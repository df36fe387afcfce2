"""make bench: every benchmark, or those named: python -m bench [client] [server]"""

from __future__ import annotations

import sys

from bench import client


def main() -> None:
    wanted = sys.argv[1:] or ["client"]
    for name in wanted:
        if name == "client":
            client.main()
        else:
            raise SystemExit(f"unknown benchmark {name!r}")


if __name__ == "__main__":
    main()
