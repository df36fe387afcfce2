"""Shared fixtures. Unit and handler tests run against moto's in-process
DynamoDB (mock_aws), which is fine single-threaded; anything concurrent runs
against moto in server mode instead: the dev server's embedded DynamoDB,
shared by several dev servers in tests/support/cluster.py."""

from __future__ import annotations

import io
import json
import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localrun.environment import FAKE_AWS
from localrun.tables import TABLE_NAMES
from localrun.template import Template, default_template
from tests.support.api import LocalApi
from tests.support.moto_tables import EmptyTables

# As in Lambda, the environment is in place before any handler module is
# imported: Powertools reads its POWERTOOLS_* variables at import time.
os.environ.update(default_template().environment("NextFunction", TABLE_NAMES) | FAKE_AWS)


def reset_core_caches() -> None:
    """The core is built once per process (once per Lambda container); tests
    change its environment between cases. Imported here: the core loads
    Powertools, which reads its POWERTOOLS_* variables at import time, after
    this module has set them."""
    from idblocks_core.core import reset_core

    reset_core()


@pytest.fixture(scope="session")
def deployed_boto_config() -> Any:
    """The store's client configuration as deployed, before the tests' change below."""
    from idblocks_core.dal import dynamodb

    return dynamodb.BOTO_CONFIG


@pytest.fixture(scope="session", autouse=True)
def requests_checked_against_the_model(deployed_boto_config: Any) -> Iterator[None]:
    """Deployed, the store's client skips botocore's check of each request
    against DynamoDB's model (dynamodb.BOTO_CONFIG says why); in the
    tests it is on, so every request shape the store sends is checked."""
    from botocore.config import Config

    from idblocks_core.dal import dynamodb

    dynamodb.BOTO_CONFIG = deployed_boto_config.merge(Config(parameter_validation=True))
    yield
    dynamodb.BOTO_CONFIG = deployed_boto_config


@pytest.fixture(autouse=True)
def every_sequence_closed() -> Iterator[None]:
    """Every Sequence a test made is closed when the test ends, passed or
    failed. One that a failing test left open (its traceback keeps it alive)
    was otherwise collected during a later test, whose warnings then held
    its "was never closed" ResourceWarning. Closed without waiting on the
    network: whatever the test still had in flight is not the next test's."""
    from idblocks import sequence

    before = weakref.WeakSet(sequence._live)  # white-box: every Sequence in the process
    yield
    for seq in list(sequence._live):
        if seq not in before:
            seq.close(timeout=0.0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", help="run the proof suites' long variants")


@pytest.fixture(scope="session")
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long"))


@pytest.fixture(scope="session")
def template() -> Template:
    return default_template()


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, template: Template) -> Iterator[Callable[..., None]]:
    """The functions' environment as template.yaml sets it (all three share
    Globals), plus fake credentials. Yields a function that overrides
    variables, e.g. ``configure(AUTO_CREATE_COUNTERS="false")``."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(var, raising=False)
    env = template.environment("NextFunction", TABLE_NAMES) | FAKE_AWS
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    reset_core_caches()

    def configure(**overrides: str) -> None:
        for key, value in overrides.items():
            assert key in env, f"{key} is not an environment variable the template sets"
            monkeypatch.setenv(key, value)
        reset_core_caches()

    yield configure
    reset_core_caches()


@pytest.fixture
def logged() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The functions' and the core's log lines (the Powertools Logger's, as
    CloudWatch gets them), kept from the console while the test runs.
    Calling it returns, as dicts, the lines written since the last call."""
    from idblocks_core.observability import logger

    buffer = io.StringIO()
    previous = logger.registered_handler.setStream(buffer)

    def read() -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
        buffer.seek(0)
        buffer.truncate()
        return lines

    yield read
    logger.registered_handler.setStream(previous)


@pytest.fixture(scope="session")
def empty_tables(template: Template) -> EmptyTables:
    return EmptyTables(template)


@pytest.fixture
def dynamodb(lambda_env: Callable[..., None], empty_tables: EmptyTables) -> Iterator[Any]:
    """moto's in-process DynamoDB, with the template's tables, empty."""
    with empty_tables.mocked() as client:
        yield client


@pytest.fixture
def api(dynamodb: Any, template: Template) -> LocalApi:
    return LocalApi(template)


def scan_all(client: Any, logical_id: str) -> list[dict[str, Any]]:
    return scan_table(client, TABLE_NAMES[logical_id])


def scan_table(client: Any, table_name: str) -> list[dict[str, Any]]:
    """Every item of a table, page after page, read consistently."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table_name, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.fixture
def table_snapshot(dynamodb: Any) -> Callable[[], Any]:
    """Everything in both tables, to show a request changed nothing."""

    def snapshot() -> Any:
        return {logical_id: sorted(scan_all(dynamodb, logical_id), key=repr) for logical_id in TABLE_NAMES}

    return snapshot
