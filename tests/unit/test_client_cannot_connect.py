"""A client or command line that cannot connect says where it tried and, for
an address on this machine, that the dev server may not be running. It said
"cannot connect to URL: <urllib3 object>: ... Connection refused", which left
a newcomer who had not started `make dev` to guess.

And it says so at once while nothing has ever answered at that address: a
wrong port or host name is not an outage, and waiting cures neither. The
first Sequence.next_id() against a port with nothing listening took 6.5 to
19 s (the policy's eight attempts, twice: the prefetch's request, then the
caller's), the command line 5 to 7.6 s. Once the service has answered
there, a refused connection is retried as any network error."""

from __future__ import annotations

import asyncio
import errno
import functools
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from idblocks import (
    AsyncSequence,
    ConfigurationError,
    FailoverBackend,
    HttpBackend,
    RetryPolicy,
    Sequence,
    ServiceUnavailable,
    cli,
)
from idblocks.async_backend import AsyncHttpBackend
from idblocks.block import Block
from idblocks.exchange import Attempt, Call, Contact, NoReply, cannot_connect, exchange, plain_http
from tests.support.stub_http import StubServer

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


# -- nothing has answered there yet: said at once ----------------------------------

# Generous: the failure takes milliseconds; what keeps these tests from
# depending on the machine's speed is the count of attempts and waits.
PROMPTLY = 3.0
BLOCK = (200, {}, {"counter": "orders", "start": 1, "end": 100, "count": 100})


class Waits(list[float]):
    """A RetryPolicy's sleep that records each back-off, and waits it."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


def tries(error: BaseException, contact: Contact, **policy: Any) -> int:
    """How many attempts one request makes when every attempt fails to
    connect with ``error`` (the exchange alone: no network, no waiting)."""
    steps = exchange(
        "http://127.0.0.1:9",
        RetryPolicy(**policy),
        Call("POST", "/counters/orders/batch", lambda body, refusals: body, {"count": 1}, "key", True),
        contact,
    )
    attempts = 0

    def drive() -> None:
        nonlocal attempts
        outcome: NoReply | None = None
        while True:
            step = steps.send(outcome)
            if isinstance(step, Attempt):
                attempts += 1
                outcome = NoReply("cannot connect", error, sent=False)
            else:
                outcome = None

    with pytest.raises(ServiceUnavailable):
        drive()
    return attempts


def as_urllib3_raises(cause: OSError) -> BaseException:
    """The error urllib3 raises for ``cause``: the socket's error as its cause."""
    try:
        if isinstance(cause, socket.gaierror):
            raise NameResolutionError("example.invalid", None, cause) from cause  # type: ignore[arg-type]
        raise NewConnectionError(None, f"Failed to establish a new connection: {cause}") from cause  # type: ignore[arg-type]
    except NewConnectionError as raised:
        return raised


REFUSED = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
NO_SUCH_HOST = socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.mark.parametrize(
    ("error", "before_any_answer"),
    [
        (REFUSED, 1),
        (as_urllib3_raises(REFUSED), 1),
        (NO_SUCH_HOST, 1),
        (as_urllib3_raises(NO_SUCH_HOST), 1),
        # A resolver that did not answer, or a connection that timed out, may pass.
        (as_urllib3_raises(socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")), 5),
        (ConnectTimeoutError(None, "timed out"), 5),
        (TimeoutError("timed out"), 5),
    ],
    ids=[
        "refused",
        "urllib3-refused",
        "no-such-host",
        "urllib3-no-such-host",
        "dns-again",
        "urllib3-timeout",
        "timeout",
    ],
)
def test_a_connection_that_finds_nothing_there_is_tried_once_until_the_endpoint_has_answered(
    error, before_any_answer
):
    assert tries(error, Contact(), attempts=5) == before_any_answer
    assert tries(error, Contact(answered=True), attempts=5) == 5


def test_first_contact_attempts_lets_a_process_wait_for_a_server_that_starts_after_it():
    assert tries(REFUSED, Contact(), attempts=5, first_contact_attempts=3) == 3
    with pytest.raises(ValueError, match="first_contact_attempts"):
        RetryPolicy(first_contact_attempts=0)


@pytest.mark.parametrize("driver", ["threads", "asyncio"])
def test_given_the_endpoint_has_answered_when_it_then_refuses_then_the_request_is_retried_as_before(driver):
    waits = Waits()
    retry = RetryPolicy(attempts=3, base=0.001, sleep=waits)
    with StubServer([BLOCK]) as stub:
        backend: Any = (HttpBackend if driver == "threads" else AsyncHttpBackend)(stub.url, retry=retry)

        def allocate() -> Block:
            answer = backend.allocate("orders", 100)
            return answer if driver == "threads" else asyncio.run(answer)

        allocate()
    assert backend.contact.answered
    with socket.socket() as held:  # the stub's port, bound and not listening: refused
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", int(stub.url.rsplit(":", 1)[1])))
        with pytest.raises(ServiceUnavailable, match=r"after 3 attempt\(s\): cannot connect"):
            allocate()
    if driver == "threads":
        assert len(waits) == 2


def test_given_nothing_listens_when_a_sequence_asks_for_its_first_id_then_it_is_told_at_once(refusing_port):
    """The Sequence's own policy, as a user makes it: the prefetch's request
    and the caller's each tried once, no back-off."""
    url = f"http://127.0.0.1:{refusing_port}"
    waits = Waits()
    started = time.monotonic()
    with (
        pytest.raises(ServiceUnavailable) as raised,
        Sequence(HttpBackend(url, retry=RetryPolicy(sleep=waits)), "orders") as seq,
    ):
        seq.next_id()
    elapsed = time.monotonic() - started
    assert "after 1 attempt(s) to an address that has never answered" in str(raised.value)
    assert DEV_SERVER_HINT in str(raised.value)
    assert waits == []
    assert elapsed < PROMPTLY, elapsed


def test_given_nothing_listens_when_an_async_sequence_asks_for_its_first_id_then_it_is_told_at_once(
    refusing_port,
):
    url = f"http://127.0.0.1:{refusing_port}"

    async def first_id() -> None:
        async with AsyncSequence(AsyncHttpBackend(url), "orders") as seq:
            await seq.next_id()

    started = time.monotonic()
    with pytest.raises(ServiceUnavailable) as raised:
        asyncio.run(first_id())
    elapsed = time.monotonic() - started
    assert "after 1 attempt(s) to an address that has never answered" in str(raised.value)
    assert DEV_SERVER_HINT in str(raised.value)
    assert elapsed < PROMPTLY, elapsed


def test_given_nothing_listens_when_the_command_line_asks_with_its_own_policy_then_it_exits_5_at_once(
    refusing_port, monkeypatch, capsys
):
    monkeypatch.delenv("IDBLOCKS_URL", raising=False)
    waits = Waits()
    monkeypatch.setattr(cli, "HttpBackend", functools.partial(HttpBackend, retry=RetryPolicy(sleep=waits)))
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        cli.main(["--endpoint", f"http://127.0.0.1:{refusing_port}", "next", "orders"])
    elapsed = time.monotonic() - started
    assert exited.value.code == 5
    assert "after 1 attempt(s)" in capsys.readouterr().err
    assert waits == []
    assert elapsed < PROMPTLY, elapsed


class NotThereYet:
    """An async backend where nothing answers until ``there`` is set: each
    request then fails at once, as the exchange fails it."""

    def __init__(self) -> None:
        self.there = False
        self.calls = 0

    async def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block:
        self.calls += 1
        if not self.there:
            raise ServiceUnavailable("cannot connect", never_answered=True)
        return Block(1, count)


def test_an_async_sequences_callers_hear_that_nothing_answered_after_one_request_and_ask_again_later():
    """AsyncSequence's callers ask again, while their wait_timeout lasts, for
    a request that got no answer: against an address where nothing
    answered, that was a request after another until the 60 s were up."""
    backend = NotThereYet()

    async def main() -> int:
        async with AsyncSequence(backend, "orders") as seq:
            with pytest.raises(ServiceUnavailable, match="cannot connect"):
                await seq.next_id()
            assert backend.calls == 1
            backend.there = True  # the server has started meanwhile
            return await seq.next_id()

    assert asyncio.run(main()) == 1


def test_regions_where_nothing_has_ever_answered_fail_over_at_once_and_the_whole_never_answered_either():
    held = [socket.socket() for _ in range(2)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        waits = Waits()
        urls = [f"http://127.0.0.1:{sock.getsockname()[1]}" for sock in held]
        backend = FailoverBackend.over(urls, retry=RetryPolicy(sleep=waits))
        with pytest.raises(ServiceUnavailable) as raised:
            backend.allocate("orders", 1, idempotency_key="k")
    finally:
        for sock in held:
            sock.close()
    assert raised.value.never_answered
    assert waits == []


# -- an https:// endpoint whose server speaks plain HTTP: said at once ------------

PLAIN_HTTP = "answered in plain HTTP, not TLS: use http://127.0.0.1:{port}"


@pytest.fixture
def plain_http_server() -> Iterator[StubServer]:
    """A server that speaks plain HTTP, as the dev server does: to a TLS
    handshake it answers `400 Bad Request` in plain text."""
    with StubServer([]) as server:
        yield server


def port_of(server: StubServer) -> str:
    return server.url.rsplit(":", 1)[1]


@pytest.mark.parametrize("driver", ["threads", "asyncio"])
def test_given_https_to_a_plain_http_server_when_a_sequence_asks_then_it_is_told_at_once_to_use_http(
    plain_http_server, driver
):
    """https:// against the dev server was retried for 4.4 s (eight
    attempts) and ended in `WRONG_VERSION_NUMBER`, with no word of http; the
    asyncio client added that nothing was listening. A wrong scheme is no
    outage: a ConfigurationError at the first attempt, naming the URL to use."""
    url = plain_http_server.url.replace("http://", "https://")
    waits = Waits()

    def first_id() -> None:
        with Sequence(HttpBackend(url, retry=RetryPolicy(sleep=waits)), "orders") as seq:
            seq.next_id()

    async def first_async_id() -> None:
        backend = AsyncHttpBackend(url, retry=RetryPolicy(sleep=waits))
        async with AsyncSequence(backend, "orders") as seq:
            await seq.next_id()

    started = time.monotonic()
    with pytest.raises(ConfigurationError) as raised:
        first_id() if driver == "threads" else asyncio.run(first_async_id())
    elapsed = time.monotonic() - started
    message = str(raised.value)
    assert PLAIN_HTTP.format(port=port_of(plain_http_server)) in message, message
    assert "is the dev server running" not in message
    assert waits == []
    assert elapsed < PROMPTLY, elapsed
    assert plain_http_server.requests == []  # nothing reached it as a request


@pytest.mark.parametrize("argv", [["next", "orders"], ["create", "orders"]])
def test_given_https_to_a_plain_http_server_when_the_command_line_asks_then_it_exits_2_at_once(
    plain_http_server, monkeypatch, capsys, argv
):
    """The command line retried `next` for seconds, and said of `create`
    that the request "may have been applied", which a TLS handshake that
    failed cannot have: bad usage (2), at once, with the URL to use."""
    monkeypatch.delenv("IDBLOCKS_URL", raising=False)
    waits = Waits()
    monkeypatch.setattr(cli, "HttpBackend", functools.partial(HttpBackend, retry=RetryPolicy(sleep=waits)))
    url = plain_http_server.url.replace("http://", "https://")
    with pytest.raises(SystemExit) as exited:
        cli.main(["--endpoint", url, *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.count("\n") == 1, err
    assert PLAIN_HTTP.format(port=port_of(plain_http_server)) in err, err
    assert "may have been applied" not in err
    assert waits == []


@pytest.mark.parametrize(
    ("endpoint", "instead"),
    [
        ("https://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("https://ids.example.com/v1", "http://ids.example.com:443/v1"),
        ("https://[::1]:3000/v1", "http://[::1]:3000/v1"),
    ],
)
def test_the_url_to_use_instead_is_the_same_port_in_http(endpoint, instead):
    """Without a port, the server that answered in plain HTTP is on 443:
    plain http:// would go to 80."""
    assert plain_http(endpoint).endswith(f": use {instead}")
