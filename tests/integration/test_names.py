"""Counter names: the service's rule, the client's copy of it, and every name
the rule allows going through HTTP and back unchanged.

"." and ".." are dot segments: an HTTP client collapses /counters/./batch into
/counters/batch before it is sent, so a counter with such a name could be
created (its name travels in a body) but never reached by a path."""

from __future__ import annotations

import re
import string

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idblocks import HttpBackend, InvalidName, check_name
from idblocks.block import Block
from idblocks_core.domain.errors import InvalidInput
from idblocks_core.domain.rules import NAME_PATTERN
from idblocks_core.domain.rules import check_name as service_check_name

ALPHABET = string.ascii_letters + string.digits + "_.-"
DOT_SEGMENTS = [".", ".."]

# Every name the rule allows: drawn from the pattern itself, and from the
# alphabet with dots made likely (dots at the start are the rule's edge).
valid_names = st.one_of(
    st.from_regex(NAME_PATTERN, fullmatch=True),
    st.text(alphabet=st.sampled_from(ALPHABET + "..."), min_size=1, max_size=128),
    st.text(alphabet=".-", min_size=1, max_size=5),
).filter(lambda name: name not in DOT_SEGMENTS)


def service_accepts(name: object) -> bool:
    try:
        service_check_name(name)
    except InvalidInput:
        return False
    return True


# -- the service ------------------------------------------------------------------


@pytest.mark.parametrize("name", DOT_SEGMENTS)
@pytest.mark.parametrize(
    "route", ["next-post", "next-get", "batch", "admin-get", "admin-set", "admin-delete"]
)
def test_dot_segment_names_in_a_path_are_400_and_change_nothing(api, table_snapshot, route, name):
    """The service's name rule let "." and ".." through: a counter no HTTP
    client can reach by its path."""
    api.call("admin-create", body={"name": "invoices"})
    before = table_snapshot()
    reply = api.call(route, name=name)
    assert (reply.status, reply.error_code) == (400, "invalid_name")
    assert "name" in reply.body["error"]["message"]
    assert table_snapshot() == before


@pytest.mark.parametrize("name", DOT_SEGMENTS)
def test_dot_segment_names_in_a_create_body_are_400_and_change_nothing(api, table_snapshot, name):
    """POST /admin/counters {"name": "."} created a counter that no route
    with the name in its path could ever reach."""
    before = table_snapshot()
    reply = api.call("admin-create", body={"name": name})
    assert (reply.status, reply.error_code) == (400, "invalid_name")
    assert table_snapshot() == before


@pytest.mark.parametrize("name", DOT_SEGMENTS)
def test_the_core_refuses_dot_segment_names(name):
    assert not service_accepts(name)


@pytest.mark.parametrize("name", ["...", ".a", "..a", "a.", "a..", "-", "_", ".-", "." * 128, "a" * 128])
def test_dots_that_are_not_a_whole_dot_segment_are_fine(api, name):
    assert api.call("admin-create", body={"name": name}).status == 201
    reply = api.call("next-post", name=name)
    assert (reply.status, reply.body) == (200, {"counter": name, "id": 1})


@given(valid_names)
def test_the_pattern_allows_exactly_the_rule(name):
    # 1-128 of the alphabet, and not a dot segment: the pattern has no
    # look-around, so its three branches must add up to exactly that
    assert 1 <= len(name) <= 128
    assert set(name) <= set(ALPHABET)
    assert service_accepts(name)


@given(
    st.one_of(st.text(), st.text(alphabet=ALPHABET + " /é\n", max_size=130), st.sampled_from(DOT_SEGMENTS))
)
def test_the_client_and_the_service_agree_on_every_name(name):
    """The client repeats the service's rule so that it can refuse a name
    before sending; the two must never disagree."""
    expected = bool(re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name)) and name not in DOT_SEGMENTS
    assert service_accepts(name) == expected
    try:
        check_name(name)
    except InvalidName:
        assert not expected
    else:
        assert expected


# -- through HTTP -----------------------------------------------------------------


@pytest.mark.parametrize(("encoded", "name"), [("%2E", "."), ("%2E%2E", ".."), ("%2e.", "..")])
def test_an_encoded_dot_segment_is_refused_over_http(dev, encoded, name):
    """Only a percent-encoded dot segment survives the HTTP library; the
    service decodes it and must refuse it like any bad name."""
    reply = requests.post(f"{dev.url}/counters/{encoded}/next", timeout=30)
    assert reply.status_code == 400, (name, reply.text)
    assert reply.json()["error"]["code"] == "invalid_name"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=valid_names)
def test_every_allowed_name_round_trips_through_the_client(dev, name):
    """Any name the rule allows can be created, allocated from, read, moved
    and deleted through HttpBackend over HTTP, and comes back unchanged."""
    backend = HttpBackend(dev.url)
    try:
        created = backend.create(name)
        assert created["name"] == name
        first = created["next"]
        assert backend.next(name) == first
        assert backend.allocate(name, 3) == Block(first + 1, first + 3)
        assert backend.get(name)["next"] == first + 4
        assert backend.set_next(name, first + 10)["next"] == first + 10
        assert backend.get(name) | {"created_at": "", "updated_at": ""} == {
            "name": name,
            "next": first + 10,
            "max": created["max"],
            "exhausted": False,
            "step": 1,
            "residue": 0,
            "cache": 1,
            "created_at": "",
            "updated_at": "",
        }
        backend.delete(name)
    finally:
        backend.close()
