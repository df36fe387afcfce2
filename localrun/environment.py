"""The environment a local process starts from."""

from __future__ import annotations

import os
from collections.abc import Mapping

# What configures AWS clients and Powertools: a child process sets up its
# own, so nothing of the parent's (fake test credentials, a developer's
# profile, the parent's tables) leaks into it.
AWS_PREFIXES = ("AWS_", "POWERTOOLS_")

# What the functions run with in-process over moto's mock_aws (the tests, the
# bench's log sizes): credentials moto accepts and a region.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def scrubbed_environment(
    drop: tuple[str, ...] = AWS_PREFIXES, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A copy of ``base`` (os.environ by default) without the variables
    whose names start with any of ``drop``."""
    source = os.environ if base is None else base
    return {key: value for key, value in source.items() if not key.startswith(drop)}
