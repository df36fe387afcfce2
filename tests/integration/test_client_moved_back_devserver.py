"""A counter that moves back under a running client: the dev server is
restarted on an earlier copy of its state (as a table restored from a
backup), on the same port, while a Sequence goes on drawing through it. The
service's counter hands out again what it handed out before; the Sequence
must not, and its caller must hear why."""

from __future__ import annotations

import shutil
import threading

from devserver.process import DevServer
from idblocks import CounterMovedBack, HttpBackend, IdBlocksError, RetryPolicy, Sequence
from tests.support.waiting import wait_until


class Drawing(threading.Thread):
    """Draws from ``seq`` until told to stop, keeping every ID and every error."""

    def __init__(self, seq: Sequence) -> None:
        super().__init__(name="drawing")
        self.seq = seq
        self.ids: set[int] = set()
        self.repeated: list[int] = []  # IDs it was handed out twice
        self.errors: list[IdBlocksError] = []
        self.after_told = 0  # IDs drawn since the first CounterMovedBack
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                drawn = self.seq.next_id()
            except IdBlocksError as exc:  # told, and it goes on, as a service would
                self.errors.append(exc)
                continue
            if drawn in self.ids:
                self.repeated.append(drawn)
            self.ids.add(drawn)
            if any(isinstance(error, CounterMovedBack) for error in self.errors):
                self.after_told += 1
            self.stop.wait(0.0005)  # a steady caller, not a burst


def test_a_sequence_running_through_a_restore_to_an_earlier_state_hands_out_no_id_twice(tmp_path):
    state = tmp_path / "state.json"
    earlier = tmp_path / "earlier.json"
    server = DevServer("--fresh", state_file=state).start()
    port = server.url.rsplit(":", 1)[1]
    # Retries a quarter of a second apart at most: the restarted server is found at once.
    retry = RetryPolicy(attempts=1_000, cap=0.25, deadline=90)
    seq = Sequence(HttpBackend(server.url, retry=retry), "moved-back", wait_timeout=120)
    drawing = Drawing(seq)
    drawing.start()
    try:
        # Given a Sequence drawing steadily, and a copy of the state taken early on
        assert wait_until(lambda: len(drawing.ids) >= 20, timeout=60)
        shutil.copyfile(state, earlier)
        # that has since taken blocks well past the copy's high-water mark
        assert wait_until(lambda: len(drawing.ids) >= 400, timeout=60)
        # When the dev server is stopped, its state put back to the copy, and
        # started again on the same port while the Sequence goes on
        assert server.stop() == 0
        shutil.copyfile(earlier, state)
        server = DevServer("--port", port, state_file=state).start()
        # Then, the counter moved back, the Sequence's caller is told so and
        # it goes on drawing above everything it was given
        assert wait_until(lambda: drawing.after_told >= 50 or drawing.repeated, timeout=90), drawing.errors
    finally:
        drawing.stop.set()
        drawing.join(timeout=60)
        seq.close(timeout=5)
        server.stop()
    assert drawing.repeated == [], "IDs handed out twice"
    told = [error for error in drawing.errors if isinstance(error, CounterMovedBack)]
    assert told, drawing.errors
    assert {(error.status, error.code) for error in told} == {(0, "counter_moved_back")}
