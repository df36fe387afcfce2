"""What make bench runs for the scale simulation, end to end: every mode,
the results file and the plot drawn by matplotlib. Here rather than with the
simulation's mechanics in tests/unit/test_scale.py: it runs the whole
pipeline (several seconds of simulation, a file and a rendered image), which
is an integration of the bench package, not a unit of it."""

from __future__ import annotations

import json

from bench import common, scale
from bench.scale import Model, Run


def test_smoke_every_mode_writes_flat_results_and_a_plot(tmp_path, monkeypatch):
    """What make bench runs, with 1 and 10 clients and short runs: every mode
    and count has its figures, the goals are judged, and the plot is drawn."""
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    model = Model(
        block_run=Run(ramp=1.0, warm_up=2.0, end=6.0),
        long_block_run=Run(ramp=1.0, warm_up=4.0, end=8.0),
        next_run=Run(ramp=0.5, warm_up=1.0, end=3.0),
    )
    results = scale.main(counts=(1, 10), model=model)
    written = json.loads((tmp_path / "scale.json").read_text())
    assert written == json.loads(json.dumps(results))
    for mode in scale.MODES:
        for clients in (1, 10):
            assert written[f"{mode.name}.{clients}.ids_per_s"] > 0
    assert written["client_adaptive.10.long.ids_per_s"] > 0
    assert written["seed"] == scale.SEED
    assert isinstance(written["goal_cached_next_1000_1e5_ids_per_s_met"], bool)
    assert (tmp_path / "scale.png").stat().st_size > 10_000
