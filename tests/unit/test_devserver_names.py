"""A name the dev server does not have (a template parameter, an identity's
role) is refused at start naming the one meant, where a typo was told only
that it did not exist, or that it was no file."""

from __future__ import annotations

import pytest

from devserver.__main__ import parse_args, read_gateway, read_template
from localrun.names import did_you_mean
from tests.support.signing import CLIENT_KEY, SERVER_ENV


def refusal(capsys: pytest.CaptureFixture[str], start) -> str:
    """What the dev server says on stderr when ``start`` stops it (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        start()
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "meant"),
    [("ClientAut", "ClientAuth"), ("clientauth", "ClientAuth"), ("AutoCreateCounter", "AutoCreateCounters")],
)
def test_a_misspelt_parameter_is_refused_naming_the_one_meant(capsys, given, meant):
    args = parse_args(["--parameter", f"{given}=true"])
    said = refusal(capsys, lambda: read_template(args))
    assert f"template.yaml has no parameter {given} (did you mean {meant}?)" in said, said


def test_a_misspelt_role_is_refused_naming_the_role_meant(capsys, monkeypatch, tmp_path):
    """`--identity clinet=...` was "cannot read the policy clinet: No such
    file or directory": a role that is no file is named with the role it
    looks like. A policy file's path is still read as one."""
    monkeypatch.chdir(tmp_path)  # where no file is named clinet
    for name, value in SERVER_ENV.items():
        monkeypatch.setenv(name, value)
    argv = ["--parameter", "ClientAuth=AWS_IAM", "--state-file", str(tmp_path / "state.json")]
    args = parse_args([*argv, "--identity", "clinet={}:{}".format(*CLIENT_KEY)])
    said = refusal(capsys, lambda: read_gateway(args, read_template(args)))
    assert "clinet is neither a role (client, admin) nor a policy file (did you mean client?)" in said, said
    missing = parse_args([*argv, "--identity", "orders.json={}:{}".format(*CLIENT_KEY)])
    said = refusal(capsys, lambda: read_gateway(missing, read_template(missing)))
    assert "cannot read the policy orders.json" in said, said
    assert "did you mean" not in said


def test_a_name_like_none_of_those_known_gets_no_suggestion():
    assert did_you_mean("Region", ["ClientAuth", "StageName"]) == ""
