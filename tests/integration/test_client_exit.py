"""Sequence at interpreter exit: a fresh interpreter that leaves a Sequence
open still closes it (and counts its unused IDs) on the way out."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_open_sequences_are_closed_at_interpreter_exit():
    script = textwrap.dedent(
        """
        from idblocks import Sequence
        from idblocks.testing import MemoryBackend

        class Reporting(Sequence):
            def close(self, timeout=10.0):
                unused = super().close(timeout)
                print("closed, unused", unused, flush=True)
                return unused

        seq = Reporting(MemoryBackend(), "orders", block_size=100)
        for _ in range(30):
            seq.next_id()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "closed, unused 70" in done.stdout
