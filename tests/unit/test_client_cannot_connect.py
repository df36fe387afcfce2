"""A client or command line that cannot connect says where it tried and, for
an address on this machine, that the dev server may not be running. It said
"cannot connect to URL: <urllib3 object>: ... Connection refused", which left
a newcomer who had not started `make dev` to guess."""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator

import pytest

from idblocks import HttpBackend, RetryPolicy, ServiceUnavailable, cli
from idblocks.exchange import cannot_connect

DEV_SERVER_HINT = "is the dev server running? (`make dev` starts it)"


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the test
    runs: bound, so nothing else can take it, and not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def no_waiting(**kwargs) -> RetryPolicy:
    return RetryPolicy(sleep=lambda _: None, **kwargs)


def test_given_nothing_listens_on_loopback_when_a_backend_asks_then_it_names_the_url_and_the_dev_server(
    refusing_port,
):
    url = f"http://127.0.0.1:{refusing_port}"
    backend = HttpBackend(url, retry=no_waiting(attempts=2))
    with pytest.raises(ServiceUnavailable) as raised:
        backend.next("orders")
    message = str(raised.value)
    assert f"cannot connect to {url}" in message
    assert DEV_SERVER_HINT in message
    assert "object at 0x" not in message


def test_given_nothing_listens_when_the_command_line_asks_then_it_exits_5_saying_where_and_why(
    refusing_port, monkeypatch, capsys
):
    monkeypatch.delenv("IDBLOCKS_URL", raising=False)
    monkeypatch.setattr(cli, "HttpBackend", functools.partial(HttpBackend, retry=no_waiting(attempts=1)))
    url = f"http://127.0.0.1:{refusing_port}"
    with pytest.raises(SystemExit) as exited:
        cli.main(["--endpoint", url, "next", "orders"])
    err = capsys.readouterr().err
    assert exited.value.code == 5
    assert err.count("\n") == 1, err
    assert f"cannot connect to {url}" in err
    assert DEV_SERVER_HINT in err


@pytest.mark.parametrize(
    ("endpoint", "hinted"),
    [
        ("http://127.0.0.1:3000", True),
        ("http://localhost:3000", True),
        ("http://[::1]:3000", True),
        ("http://127.0.0.5:3000", True),
        ("https://abc123.execute-api.eu-west-1.amazonaws.com/v1", False),
        ("http://10.0.0.7:3000", False),
    ],
)
def test_only_an_address_on_this_machine_suggests_the_dev_server(endpoint, hinted):
    said = cannot_connect(endpoint, OSError("Connection refused"))
    assert said.startswith(f"cannot connect to {endpoint} (")
    assert (DEV_SERVER_HINT in said) is hinted
