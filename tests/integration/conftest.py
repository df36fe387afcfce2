"""The dev servers the integration tests share: one of each, fresh, per
test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devserver.process import DevServer
from tests.support.signing import iam_dev_server


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A dev server as `make dev` starts it, with no counters yet."""
    with DevServer("--fresh", state_file=tmp_path_factory.mktemp("dev") / "state.json") as server:
        yield server


@pytest.fixture(scope="module")
def iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A dev server that checks SigV4 as API Gateway does (ClientAuth
    AWS_IAM), against tests.support.signing's credentials."""
    with iam_dev_server(tmp_path_factory.mktemp("iam") / "state.json") as server:
        yield server
