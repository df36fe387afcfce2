"""The key pair the dev server makes for a developer with no credentials
(devserver/state.py): kept beside its state, the owner's alone, the same
after a restart; a file that holds none is reported, never replaced."""

from __future__ import annotations

import configparser
import stat

import pytest

from devserver.gateway import made_credentials
from devserver.state import StateError, kept_key_pair


def maker(pairs):
    made = iter(pairs)
    return lambda: next(made)


def test_a_pair_is_made_once_kept_and_read_back(tmp_path):
    path = tmp_path / ".dev-state" / "credentials"
    make = maker([("AKIAFIRST", "first-secret"), ("AKIASECOND", "second-secret")])
    assert kept_key_pair(path, make) == (("AKIAFIRST", "first-secret"), True)
    assert kept_key_pair(path, make) == (("AKIAFIRST", "first-secret"), False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["credentials"]  # no temporary file left


def test_the_file_is_an_aws_credentials_file_any_client_reads(tmp_path):
    path = tmp_path / "credentials"
    kept_key_pair(path, maker([("AKIAFIRST", "first-secret")]))
    parser = configparser.ConfigParser()
    parser.read(path)
    assert dict(parser["default"]) == {
        "aws_access_key_id": "AKIAFIRST",
        "aws_secret_access_key": "first-secret",
    }


def test_a_pair_kept_readable_by_others_is_made_the_owners_alone(tmp_path):
    path = tmp_path / "credentials"
    kept_key_pair(path, maker([("AKIAFIRST", "first-secret")]))
    path.chmod(0o644)
    assert kept_key_pair(path, maker([]))[0] == ("AKIAFIRST", "first-secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "text", ["", "[default]\naws_access_key_id = AKIA\n", "not an ini file", "[other]\na = b\n"]
)
def test_a_file_that_holds_no_pair_is_reported_and_left_alone(tmp_path, text):
    path = tmp_path / "credentials"
    path.write_text(text)
    with pytest.raises(StateError, match="delete the file for a new pair"):
        kept_key_pair(path, maker([("AKIANEW", "new")]))
    assert path.read_text() == text


def test_the_dev_servers_credentials_are_the_kept_pair(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ".dev-state" / "credentials"
    first = made_credentials(path)
    again = made_credentials(path)
    assert first.key == again.key
    assert first.key_file == again.key_file == path
    # The file is named as the developer would find it from where they are.
    assert first.source == "made now, kept in .dev-state/credentials"
    assert again.source == "made before, kept in .dev-state/credentials"
