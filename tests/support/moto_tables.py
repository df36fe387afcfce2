"""The template's tables in moto's in-process DynamoDB, made once per test
process and handed to each test as copies: creating them through the API
(create, wait for them, TTL) for every test was the largest part of the
unit run."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from localrun.environment import FAKE_AWS
from localrun.tables import TABLE_NAMES, create_tables
from localrun.template import Template, default_template


def _backend(client: Any) -> Any:
    """moto's in-process DynamoDB that ``client`` talks to (white-box)."""
    return dynamodb_backends[DEFAULT_ACCOUNT_ID][client.meta.region_name]


class EmptyTables:
    """The tables as moto holds them just after create_tables made them."""

    def __init__(self, template: Template) -> None:
        # One session for every client made here: building a session
        # registers botocore's handlers again, which costs more than a client.
        self._session = boto3.Session()
        with mock_aws():
            client = self._session.client("dynamodb")
            create_tables(client, template, TABLE_NAMES)
            tables = _backend(client).tables
            self._tables = copy.deepcopy({name: tables[name] for name in TABLE_NAMES.values()})

    @contextmanager
    def mocked(self) -> Iterator[Any]:
        """mock_aws, as each test had it: it starts with no data and drops all
        of it at the end; in between, the tables are copies of the empty ones,
        so nothing one test writes or changes reaches the next."""
        with mock_aws():
            client = self._session.client("dynamodb")
            _backend(client).tables.update(copy.deepcopy(self._tables))
            if sorted(client.list_tables()["TableNames"]) != sorted(TABLE_NAMES.values()):
                raise RuntimeError("moto did not take the copied tables: has its backend changed?")
            yield client


def counters_table_started() -> tuple[Any, Any]:
    """moto's in-process DynamoDB, started with the template's counters table
    and nothing in it, for a hypothesis state machine, whose examples each
    need their own: the mock, for the machine's teardown to stop, and a
    client of it."""
    os.environ.update(FAKE_AWS)
    mock = mock_aws()
    mock.start()
    client = boto3.client("dynamodb")
    table = default_template().create_table_kwargs("CountersTable", TABLE_NAMES["CountersTable"])
    client.create_table(**table)
    return mock, client
