"""One client process: THREADS threads share one Sequence and each draws
PER_THREAD IDs; writes them, one per line, to OUT.

    python -m tests.support.draw_ids URL COUNTER THREADS PER_THREAD BLOCK OUT
"""

from __future__ import annotations

import sys
import threading

from idblocks import HttpBackend, Sequence


def main() -> None:
    url, counter, threads, per_thread, block, out = sys.argv[1:7]
    seq = Sequence(HttpBackend(url), counter, block_size=int(block))
    results: list[list[int]] = [[] for _ in range(int(threads))]
    start = threading.Barrier(int(threads))

    def work(slot: int) -> None:
        start.wait()
        results[slot] = [seq.next_id() for _ in range(int(per_thread))]

    workers = [threading.Thread(target=work, args=(i,)) for i in range(int(threads))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    unused = seq.close()
    with open(out, "w") as file:
        file.write(f"# unused {unused}\n")
        file.writelines(f"{i}\n" for ids in results for i in ids)


if __name__ == "__main__":
    main()
