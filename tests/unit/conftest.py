"""Fixtures for the in-process unit tests."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import botocore.session
import pytest


@pytest.fixture(scope="session", autouse=True)
def one_botocore_loader() -> Iterator[None]:
    """Every test builds fresh boto3 sessions (moto resets the default one,
    the core's clients are rebuilt per test), and each fresh session reads
    and parses the DynamoDB service model from disk again: that was about
    half of the unit run. One loader per data path, shared by every session,
    is what a single long-lived session does anyway; the models it caches
    are read-only to botocore."""
    original = botocore.session.create_loader
    shared = functools.cache(original)
    botocore.session.create_loader = shared
    try:
        yield
    finally:
        botocore.session.create_loader = original
