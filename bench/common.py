"""What every benchmark shares: where results go and what machine made them."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from idblocks.sequence import gil_enabled

RESULTS = Path(__file__).resolve().parent / "results"


def use_core_layer() -> None:
    """Make the service's own modules (its layer) importable, as the
    functions import them."""
    layer = str(Path(__file__).resolve().parent.parent / "layers" / "core")
    if layer not in sys.path:
        sys.path.insert(0, layer)


def machine_facts() -> dict[str, str | int]:
    return {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count() or 0,
        "gil": str(gil_enabled()).lower(),
    }


def write_results(name: str, results: dict[str, object]) -> Path:
    """A flat JSON object, so runs can be compared over time."""
    assert all(not isinstance(v, dict | list) for v in results.values()), "keep results flat"
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path.relative_to(RESULTS.parent.parent)}", flush=True)
    return path
