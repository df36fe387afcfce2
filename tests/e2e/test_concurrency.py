"""A short concurrent run against the target: several clients, several
threads each, one counter. One ID handed out twice would be an incident."""

from __future__ import annotations

import threading

from idblocks import Sequence

CLIENTS, THREADS_PER_CLIENT, IDS_PER_THREAD = 4, 3, 250


def test_threads_and_clients_never_get_the_same_id(target, created):
    """Given four clients of one counter with three threads each, when every
    thread draws 250 IDs (mixing next_id and take), then all 3000 IDs are
    distinct."""
    drawn: list[list[int]] = []
    errors: list[BaseException] = []

    def draw(seq: Sequence) -> None:
        mine: list[int] = []
        try:
            while len(mine) < IDS_PER_THREAD:  # bounded: each pass adds at least one
                if len(mine) % 50 == 0:
                    mine.extend(seq.take(min(10, IDS_PER_THREAD - len(mine))))
                else:
                    mine.append(seq.next_id())
        except BaseException as exc:  # noqa: BLE001 - reported below, a thread's assert alone is lost
            errors.append(exc)
        drawn.append(mine)

    sequences = [Sequence(target.backend(), created, block_size=20) for _ in range(CLIENTS)]
    threads = [
        threading.Thread(target=draw, args=(seq,)) for seq in sequences for _ in range(THREADS_PER_CLIENT)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for seq in sequences:
        seq.close()
    assert not any(thread.is_alive() for thread in threads), "a thread is still drawing after 300 s"
    assert errors == []
    every = [i for ids in drawn for i in ids]
    assert len(every) == CLIENTS * THREADS_PER_CLIENT * IDS_PER_THREAD
    assert len(set(every)) == len(every), "an ID was handed out twice"
