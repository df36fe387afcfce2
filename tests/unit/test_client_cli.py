"""The idblocks command line: its options, its exit statuses, and that every
failure is one line on stderr, never a traceback. Runs main() in-process
against the scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from idblocks import cli
from tests.support.aws_env import credentials_without_region, without_aws_credentials
from tests.support.stub_http import StubServer

ONE_ID = (200, {}, {"counter": "orders", "id": 7})
BLOCK = (200, {}, {"counter": "orders", "start": 1, "end": 5, "count": 5})


def error(status, code):
    return (status, {}, {"error": {"code": code, "message": f"{code} happened"}})


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("IDBLOCKS_URL", "IDBLOCKS_AUTH", "IDBLOCKS_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def run(capsys, *argv):
    """main(argv) -> (exit status, stdout, stderr). An exception escaping
    main() fails the test: the user would have seen a traceback."""
    try:
        cli.main(list(argv))
        status = 0
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line(err):
    assert err.count("\n") == 1, err
    assert err.startswith("idblocks: error: "), err
    assert "Traceback" not in err


def test_next_prints_the_id(capsys):
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "next", "orders")
    assert (status, json.loads(out), err) == (0, {"counter": "orders", "id": 7}, "")
    assert stub.requests[0]["path"] == "/counters/orders/next"


@pytest.mark.parametrize("value", ["IAM", "Iam", "aws_iam", "AWS_IAM", "sigv4", " iam"])
def test_an_unknown_auth_in_the_environment_is_bad_usage(capsys, monkeypatch, value):
    """IDBLOCKS_AUTH=IAM (wrong case) bypassed --auth's choices and sent the
    request with no authentication at all."""
    monkeypatch.setenv("IDBLOCKS_AUTH", value)
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "next", "orders")
    assert status == 2
    assert out == ""
    assert "iam, api-key, none" in err
    assert stub.requests == []


def test_an_unknown_auth_option_is_bad_usage(capsys):
    with StubServer([ONE_ID]) as stub:
        status, _, err = run(capsys, "--endpoint", stub.url, "--auth", "IAM", "next", "orders")
    assert status == 2
    assert "'iam', 'api-key', 'none'" in err or "iam, api-key, none" in err
    assert stub.requests == []


@pytest.mark.parametrize(
    ("argv", "fixed"),
    [
        (["next", "orders", "--auth", "none"], "idblocks --auth none next orders"),
        (
            ["batch", "orders", "5", "--timeout=3", "--region", "eu-west-1"],
            "idblocks --timeout=3 --region eu-west-1 batch orders 5",
        ),
        (["list", "--limit", "2", "--auth", "none"], "idblocks --auth none list --limit 2"),
    ],
)
def test_an_option_after_the_command_is_told_to_go_before_it(capsys, argv, fixed):
    """`idblocks next orders --auth none` said only "unrecognized arguments"."""
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, *argv)
    assert (status, out) == (2, "")
    assert "go before the command" in err
    assert fixed.replace("idblocks ", f"idblocks --endpoint {stub.url} ") in err, err
    assert stub.requests == []


def test_an_unknown_argument_is_still_named(capsys):
    with StubServer([ONE_ID]) as stub:
        status, _, err = run(capsys, "--endpoint", stub.url, "next", "orders", "--frobnicate")
    assert status == 2
    assert "unrecognized arguments: --frobnicate" in err
    assert "go before" not in err


@pytest.mark.parametrize(
    ("argv", "misspelt", "meant"),
    [
        (["--endpont", "{url}", "next", "orders"], "--endpont", "--endpoint"),
        (["--endpont={url}", "next", "orders"], "--endpont", "--endpoint"),
        (["--endpoint", "{url}", "--timeot", "3", "next", "orders"], "--timeot", "--timeout"),
        (["--auht", "none", "--endpoint", "{url}", "next", "orders"], "--auht", "--auth"),
    ],
)
def test_a_misspelt_option_is_named_with_the_one_meant_and_nothing_is_sent(capsys, argv, misspelt, meant):
    """`idblocks --endpont http://...` said "invalid choice: 'http://...'":
    argparse set the unknown option aside and read its value as the command."""
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(capsys, *(arg.format(url=stub.url) for arg in argv))
    assert (status, out) == (2, "")
    assert f"error: unknown option {misspelt}: did you mean {meant}?" in err, err
    assert "invalid choice" not in err
    assert stub.requests == []


def test_an_unambiguous_prefix_of_an_option_is_still_taken(capsys):
    """argparse takes a prefix of a long option: that is no misspelling."""
    with StubServer([ONE_ID]) as stub:
        status, out, _ = run(capsys, "--end", stub.url, "next", "orders")
    assert (status, json.loads(out)["id"]) == (0, 7)


def test_the_auth_in_the_environment_is_used(capsys, monkeypatch):
    monkeypatch.setenv("IDBLOCKS_AUTH", "api-key")
    monkeypatch.setenv("IDBLOCKS_API_KEY", "k-123")
    with StubServer([ONE_ID]) as stub:
        status, _, _ = run(capsys, "--endpoint", stub.url, "next", "orders")
    assert status == 0
    assert stub.requests[0]["headers"]["x-api-key"] == "k-123"


@pytest.mark.parametrize(
    ("argv", "reply"),
    [
        (["next", "orders"], (200, {}, {"counter": "orders"})),
        (["next", "orders"], (200, {}, {"counter": "orders", "id": "7"})),
        (["batch", "orders", "5"], (200, {}, {"counter": "orders", "start": 1})),
        (["batch", "orders", "5"], (200, {}, ["not", "a", "block"])),
        (["list", "--all"], (200, {}, {"counters": [], "next": "x"})),
        (["get", "orders"], (200, {}, "orders")),
    ],
)
def test_a_200_without_the_expected_fields_is_one_line_and_exit_1(capsys, argv, reply):
    """A 200 without the field the route promises ended in a KeyError
    traceback."""
    with StubServer([reply]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, *argv)
    assert (status, out) == (1, "")
    assert_one_line(err)
    assert "answered" in err


def test_a_200_that_is_not_json_is_one_line_and_exit_1(capsys):
    """A non-JSON 200 exited 2, as if the command line had been wrong."""
    with StubServer([(200, {}, b"<html>maintenance</html>")]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "next", "orders")
    assert (status, out) == (1, "")
    assert_one_line(err)
    assert "not JSON" in err


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (error(400, "invalid_count"), 2),
        (error(400, "invalid_name"), 2),
        (error(415, "unsupported_media_type"), 2),
        (error(422, "idempotency_key_reused"), 2),
        ((403, {}, {"message": "Missing Authentication Token"}), 2),
        ((401, {}, {"message": "Unauthorized"}), 2),
        (error(404, "counter_not_found"), 3),
        (error(409, "counter_exhausted"), 4),
        (error(409, "counter_would_move_back"), 4),
        (error(409, "region_mismatch"), 4),
        (error(501, "not_implemented"), 1),
    ],
)
def test_exit_status_follows_the_answer(capsys, reply, expected):
    """A 400 from the service exited 1, like a failure of the service, not 2:
    the request was wrong, and retrying it will not help."""
    with StubServer([reply]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "batch", "orders", "5")
    assert (status, out) == (expected, "")
    assert_one_line(err)
    assert len(stub.requests) == 1


def test_a_missing_counter_is_told_with_the_command_that_creates_it(capsys, api, lambda_env):
    """The first error a new deployment meets (AutoCreateCounters is false
    by default): the service's 404, as its handler answers it, said by the
    command line in one line, naming the command that creates the counter."""
    lambda_env(AUTO_CREATE_COUNTERS="false")
    reply = api.call("next-post", name="orders")
    capsys.readouterr()  # the handler's own metrics line
    with StubServer([(reply.status, {}, reply.body)]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "next", "orders")
    assert (status, out) == (3, "")
    assert_one_line(err)
    assert "create it with `idblocks create orders`" in err, err
    assert "AutoCreateCounters is false" in err, err


@pytest.mark.parametrize("name", [".", "..", "a b", "x" * 129])
def test_a_name_the_service_would_refuse_is_refused_before_sending(capsys, name):
    with StubServer([ONE_ID]) as stub:
        status, _, err = run(capsys, "--endpoint", stub.url, "next", name)
    assert status == 2
    assert_one_line(err)
    assert "invalid_name" in err
    assert stub.requests == []


def test_no_aws_credentials_is_one_line_saying_how_to_provide_them(capsys, monkeypatch, tmp_path):
    """--auth iam with no credentials said only "no AWS credentials found",
    not where they could come from."""
    without_aws_credentials(monkeypatch, tmp_path)
    with StubServer([ONE_ID]) as stub:
        status, out, err = run(
            capsys, "--endpoint", stub.url, "--auth", "iam", "--region", "eu-west-1", "next", "orders"
        )
    assert (status, out) == (2, "")
    assert_one_line(err)
    for way in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "role"):
        assert way in err
    assert stub.requests == []


def test_no_region_for_iam_is_one_line_naming_the_option(capsys, monkeypatch):
    credentials_without_region(monkeypatch)
    with StubServer([ONE_ID]) as stub:
        status, _, err = run(capsys, "--endpoint", stub.url, "--auth", "iam", "next", "orders")
        assert status == 2
        assert_one_line(err)
        assert "--region" in err
        assert stub.requests == []
        status, _, _ = run(
            capsys, "--endpoint", stub.url, "--auth", "iam", "--region", "eu-west-1", "next", "o"
        )
    assert status == 0
    assert "/eu-west-1/execute-api/" in stub.requests[0]["headers"]["Authorization"]


def test_no_endpoint_is_bad_usage(capsys):
    status, _, err = run(capsys, "next", "orders")
    assert status == 2
    assert "IDBLOCKS_URL" in err


# -- --help ---------------------------------------------------------------------


def all_parsers():
    top = cli.parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return [("idblocks", top), *commands.choices.items()]


def test_help_lists_the_exit_statuses_and_how_to_call_a_deployed_stack(capsys):
    """--help did not say what the exit statuses mean, nor how to reach a
    deployed stack (which needs --auth iam; the default is none)."""
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for code in range(6):
        assert re.search(rf"^\s+{code}\s+\S", out, re.MULTILINE), f"exit status {code} not explained"
    assert "--auth iam" in out
    assert "AWS_REGION" in out
    assert "AWS_PROFILE" in out


@pytest.mark.parametrize(("command", "parser"), all_parsers(), ids=[name for name, _ in all_parsers()])
def test_every_argument_has_help_and_every_option_its_default(command, parser):
    """--auth's default (none) and the other defaults were not in the help;
    positional arguments had no help at all."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        assert action.help, f"{command} {action.dest}: no help"
        if action.option_strings:
            assert "default" in action.help, f"{command} {action.option_strings[0]}: no default in its help"


def test_batch_prints_the_step(capsys):
    """A stepped block (RegionCount 3) is printed with its step, so that no
    one reads start..end as consecutive IDs."""
    body = {"counter": "orders", "start": 2, "end": 14, "count": 5, "step": 3}
    with StubServer([(200, {}, body)]) as stub:
        status, out, _ = run(capsys, "--endpoint", stub.url, "batch", "orders", "5")
    assert status == 0
    assert json.loads(out) == body


STATE = (200, {}, {"name": "orders", "next": 1, "max": 9, "cache": 100})


def test_create_sends_the_cache_setting(capsys):
    with StubServer([(201, {}, STATE[2])]) as stub:
        status, out, _ = run(capsys, "--endpoint", stub.url, "create", "orders", "--cache", "100")
    assert (status, json.loads(out)["cache"]) == (0, 100)
    assert json.loads(stub.requests[0]["body"]) == {"name": "orders", "cache": 100}


@pytest.mark.parametrize(
    ("options", "body"),
    [
        (["--cache", "100"], {"cache": 100}),
        (["--next", "5"], {"next": 5}),
        (["--next", "5", "--cache", "1"], {"next": 5, "cache": 1}),
    ],
)
def test_update_puts_next_cache_or_both(capsys, options, body):
    with StubServer([STATE]) as stub:
        status, _, _ = run(capsys, "--endpoint", stub.url, "update", "orders", *options)
    assert status == 0
    assert (stub.requests[0]["method"], stub.requests[0]["path"]) == ("PUT", "/admin/counters/orders")
    assert json.loads(stub.requests[0]["body"]) == body


def test_list_deleted_asks_for_deleted_counters_on_every_page(capsys):
    first = (200, {}, {"counters": [{"name": "a"}], "cursor": "c1", "deleted": True})
    last = (200, {}, {"counters": [{"name": "b", "deleted": True}], "cursor": None, "deleted": True})
    with StubServer([first, last]) as stub:
        status, out, _ = run(capsys, "--endpoint", stub.url, "list", "--all", "--deleted")
    assert status == 0
    assert [r["path"] for r in stub.requests] == [
        "/admin/counters?deleted=true",
        "/admin/counters?cursor=c1&deleted=true",
    ]
    assert json.loads(out) == {
        "counters": [{"name": "a"}, {"name": "b", "deleted": True}],
        "cursor": None,
        "deleted": True,
    }


RECORD = {"message": "allocation", "counter": "orders", "first_id": 1, "last_id": 40, "step": 1}


def test_recover_needs_a_source_and_sends_nothing_without_one(capsys):
    with StubServer([]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "recover", "--dry-run")
    assert (status, out) == (2, "")
    assert_one_line(err)
    assert "--from-table, --from-records or both" in err
    assert stub.requests == []


def test_recover_dry_run_prints_the_plan_and_only_reads(capsys, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(RECORD) + "\n")
    page = {"counters": [{"name": "orders", "next": 5, "max": 100}], "cursor": None, "deleted": True}
    with StubServer([(200, {}, page)]) as stub:
        status, out, err = run(
            capsys, "--endpoint", stub.url, "recover", "--from-records", str(records), "--dry-run"
        )
    assert (status, err) == (0, "")
    [planned] = json.loads(out)["counters"]
    assert (planned["now"], planned["plan"]) == ({"state": "live", "next": 5}, [{"step": "set", "next": 41}])
    assert [(r["method"], r["path"]) for r in stub.requests] == [
        ("GET", "/admin/counters?limit=1000&deleted=true")
    ]


def test_recover_that_stops_prints_its_report_and_one_line_and_exits_as_the_step_failed(capsys, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(RECORD) + "\n")
    page = {"counters": [{"name": "orders", "next": 5, "max": 100}], "cursor": None, "deleted": True}
    with StubServer([(200, {}, page), error(409, "region_mismatch")]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "recover", "--from-records", str(records))
    assert status == 4
    assert json.loads(out)["failed"] == {
        "counter": "orders",
        "step": "set",
        "next": 41,
        "error": "region_mismatch: region_mismatch happened (HTTP 409)",
    }
    assert_one_line(err)
    assert "recover stopped at counter 'orders'" in err
    assert "run recover again" in err


@pytest.mark.parametrize(
    ("options", "region"), [([], "eu-west-3"), (["--region", "ap-south-2"], "ap-south-2")]
)
def test_recover_reads_the_table_in_the_stacks_region_unless_told_another(
    capsys, monkeypatch, options, region
):
    from idblocks import recovery

    read_in = []
    monkeypatch.setattr(recovery, "read_counters", lambda table, region: read_in.append(region) or {})
    monkeypatch.setattr(recovery, "counters_here", lambda backend: {})
    endpoint = "https://abc123.execute-api.eu-west-3.amazonaws.com/v1"
    status, _, _ = run(capsys, "--endpoint", endpoint, *options, "recover", "--from-table", "t", "--dry-run")
    assert (status, read_in) == (0, [region])


def test_recover_of_records_that_cannot_be_read_is_bad_usage_and_sends_nothing(capsys, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(RECORD | {"last_id": "40"}) + "\n")
    with StubServer([]) as stub:
        status, out, err = run(capsys, "--endpoint", stub.url, "recover", "--from-records", str(records))
    assert (status, out) == (2, "")
    assert_one_line(err)
    assert stub.requests == []


def test_update_without_a_change_is_bad_usage_and_sends_nothing(capsys):
    with StubServer([STATE]) as stub:
        status, _, err = run(capsys, "--endpoint", stub.url, "update", "orders")
    assert status == 2
    assert_one_line(err)
    assert stub.requests == []
