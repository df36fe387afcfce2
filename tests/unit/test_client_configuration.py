"""Configuration is refused at once: a malformed endpoint, port, region,
credential source or auth raises a ConfigurationError (a ValueError) when
the backend is made, before any request, in HttpBackend and
AsyncHttpBackend alike; the command line exits with its usage status (2),
at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator

import pytest

import idblocks
from idblocks import ApiKeyAuth, HttpBackend, IamAuth, NoAuth
from idblocks.async_backend import AsyncHttpBackend
from tests.support.stub_http import StubServer
from tests.unit.test_client_cli import assert_one_line, clean_env, run  # noqa: F401 - a fixture

BACKENDS = [HttpBackend, AsyncHttpBackend]
ONE_ID = (200, {}, {"counter": "orders", "id": 7})


@contextlib.contextmanager
def refused(match: str) -> Iterator[None]:
    """The block raises a ConfigurationError saying ``match``: a ValueError,
    as a bad endpoint always was."""
    with pytest.raises(ValueError, match=match) as caught:
        yield
    assert type(caught.value).__name__ in ("ConfigurationError", "MissingCredentials", "MissingRegion")
    assert isinstance(caught.value, idblocks.ConfigurationError)


MALFORMED_ENDPOINTS = [
    ("http://a..b", "empty label"),
    ("http://127.0.0.1:99999", "port"),
    ("http://127.0.0.1:0", "port"),
    ("http://127.0.0.1:http", "port"),
    ("https://-api.example.com", "host"),
    ("http://a b.example.com", "host"),
    ("http://127.0.0.1:3000?stage=v1", "query"),
    ("http://127.0.0.1:3000/v1#top", "fragment"),
    ("http://user:secret@127.0.0.1:3000", "user"),
]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize(("endpoint", "said"), MALFORMED_ENDPOINTS, ids=[e for e, _ in MALFORMED_ENDPOINTS])
def test_a_malformed_endpoint_is_refused_when_the_backend_is_made(backend, endpoint, said):
    """Reproduces: http://a..b and port 99999 were taken; every request was
    then retried 8 times and reported as ServiceUnavailable ("the request
    may have been applied", though nothing was sent); AsyncHttpBackend with
    port 99999 raised a bare ExceptionGroup(OverflowError)."""
    with refused(re.escape(endpoint)):
        backend(endpoint)
    with refused(said):
        backend(endpoint)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:3000",
        "http://localhost:3000/",
        "http://[::1]:3000",
        "https://abc123.execute-api.eu-west-1.amazonaws.com/v1",
        "https://ids.example.com./v1",
        "http://dev_server:3000",
    ],
)
def test_well_formed_endpoints_are_taken(backend, endpoint):
    assert backend(endpoint).endpoint == endpoint.rstrip("/")


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize(
    ("auth", "said"),
    [
        ("none", r"NoAuth\(\)"),
        ("iam", r"IamAuth\(\)"),
        (NoAuth, r"the class NoAuth: pass an instance, NoAuth\(\)"),
        (IamAuth, r"the class IamAuth: pass an instance, IamAuth\(\)"),
        (ApiKeyAuth, r"the class ApiKeyAuth: pass an instance, ApiKeyAuth\("),
        (42, "headers"),
    ],
    ids=["'none'", "'iam'", "NoAuth", "IamAuth", "ApiKeyAuth", "42"],
)
def test_an_auth_that_is_not_an_auth_is_refused_saying_what_to_pass(backend, auth, said):
    """Reproduces: auth="none" was taken and every request then failed with
    an AttributeError from deep inside; auth=NoAuth (the class) with a
    TypeError about a missing argument."""
    with refused(said):
        backend("http://127.0.0.1:3000", auth=auth)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("region", ["eu west 1", "EU-WEST-1", "eu-west-1/", "eu-west", " ", "eu-west-1\n"])
def test_a_malformed_region_is_refused_before_any_request(backend, region, monkeypatch):
    """Reproduces: a malformed region was signed for, and only the service's
    403 said something was wrong."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with refused("region"):
        backend("http://127.0.0.1:3000", auth=IamAuth(region=region))
    monkeypatch.setenv("AWS_REGION", region)
    with refused("AWS_REGION"):
        backend("http://127.0.0.1:3000", auth=IamAuth())


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_profile_that_does_not_exist_is_refused_before_any_request(backend, monkeypatch, tmp_path):
    """Reproduces: IamAuth(lazy=True), which looks for credentials at the
    first request, took AWS_PROFILE naming no profile; the first request
    then failed."""
    (tmp_path / "config").write_text("[profile real]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_PROFILE", "not-a-profile")
    with refused("not-a-profile"):
        backend("http://127.0.0.1:3000", auth=IamAuth(region="eu-west-1", lazy=True))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_half_a_key_pair_in_the_environment_is_refused_before_any_request(backend, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    with refused("AWS_SECRET_ACCESS_KEY"):
        backend("http://127.0.0.1:3000", auth=IamAuth(region="eu-west-1", lazy=True))


def test_missing_credentials_and_region_are_configuration_errors_too():
    """What IamAuth already refused before sending is one kind with the rest."""
    assert issubclass(idblocks.MissingCredentials, idblocks.ConfigurationError)
    assert issubclass(idblocks.MissingRegion, idblocks.ConfigurationError)
    assert issubclass(idblocks.MissingRegion, idblocks.AuthError)  # as before


def test_an_async_backend_refused_never_needed_a_loop():
    """Refused where it is made, outside any event loop."""
    with pytest.raises(ValueError, match="port"):
        AsyncHttpBackend("http://127.0.0.1:99999")
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


# -- the command line ------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:99999", "http://a..b"])
def test_the_command_line_exits_2_at_once_for_a_malformed_endpoint(capsys, endpoint):
    """Reproduces: exit 5 (service unavailable) after 8 s of retries."""
    status, out, err = run(capsys, "--endpoint", endpoint, "next", "orders")
    assert (status, out) == (2, "")
    assert_one_line(err)
    assert endpoint in err


def test_the_command_line_exits_2_for_a_malformed_region_and_sends_nothing(capsys, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(
            capsys, "--endpoint", stub.url, "--auth", "iam", "--region", "eu west 1", "next", "orders"
        )
    assert (status, out, stub.requests) == (2, "", [])
    assert_one_line(err)
    assert "region" in err


def test_a_configuration_error_raised_later_exits_2(capsys, monkeypatch):
    """Whatever raises a ConfigurationError, the exit status is the usage one."""
    from idblocks import cli

    def refuse(*args, **kwargs):
        raise idblocks.ConfigurationError("the endpoint's host is malformed")

    monkeypatch.setattr(cli, "HttpBackend", refuse)
    status, _, err = run(capsys, "--endpoint", "http://127.0.0.1:3000", "next", "orders")
    assert status == 2
    assert json.dumps("malformed")[1:-1] in err
