"""Waiting for a condition another thread makes true, without a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> bool:
    """True once ``condition()`` holds; False if it still does not after
    ``timeout`` seconds (generous: the tests assert on the result)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True
