"""The tracing switch, POWERTOOLS_TRACE_DISABLED, as the handler module reads
it at import. What each setting loads and patches in a cold start is in
tests/integration/test_tracing.py (a fresh interpreter per setting)."""

from __future__ import annotations

import pytest


def test_a_bad_tracing_switch_fails_at_import():
    """A value that is neither true nor false stops the cold start rather
    than silently tracing or not."""
    from idblocks_core.observability import tracing_enabled

    assert tracing_enabled({}) is True
    assert tracing_enabled({"POWERTOOLS_TRACE_DISABLED": "true"}) is False
    assert tracing_enabled({"POWERTOOLS_TRACE_DISABLED": "0"}) is True
    with pytest.raises(ValueError, match="maybe"):
        tracing_enabled({"POWERTOOLS_TRACE_DISABLED": "maybe"})
