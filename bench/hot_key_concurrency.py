"""What a sustained hot key does to Lambda concurrency, in the scale model
(bench/scale.py): `next` callers (20 IDs/s each, one write per ID) on one
counter item, whose budget is 1,000 writes/s, with the store's bounded retry
of a throttled write and with the one it replaced (4 attempts, backoffs of up
to 1, 2 and 4 s), side by side in one run.

    python -m bench.hot_key_concurrency [CLIENTS ...]     (default: 10 50 100 1000)

Prints, per policy and number of callers, the environments the function
needed (the model's concurrency, capped at its 1,000), the IDs/s served and
the share of requests throttled.
"""

from __future__ import annotations

import sys

from bench import scale

# The store's retry as it is (the model's defaults), and as it was.
POLICIES = (
    ("bounded: 2 attempts, 50 ms base", scale.Model()),
    ("before: 4 attempts, 1 s base", scale.Model(throttled_attempts=4, throttle_backoff_base=1.0)),
)


def main(argv: list[str]) -> None:
    counts = [int(count) for count in argv] or [10, 50, 100, 1_000]
    print(f"{'policy':<34} {'callers':>7} {'environments':>12} {'IDs/s':>7} {'throttled %':>11}")
    for label, model in POLICIES:
        for count in counts:
            run = scale.simulate(scale.MODES_BY_NAME["next"], count, model)
            print(
                f"{label:<34} {count:>7} {run['environments']:>12} {run['ids_per_s']:>7.0f}"
                f" {run['requests_throttled_pct']:>11.1f}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
