"""The documentation's tables are the code's: each generated block of docs/
is what scripts.docs_tables makes from the code now, and the words those
tables carry (the CLI's exit statuses, the error catalogue's meanings) say
what the code does."""

from __future__ import annotations

import re

import pytest

from idblocks import cli
from idblocks.errors import error_for
from idblocks.exchange import retryable
from idblocks_core.domain.errors import ERROR_CODES
from localrun.template import ROOT
from scripts import docs_tables

PAGES = docs_tables.pages()


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_generated_table_is_what_the_code_says_now(page):
    text = page.read_text()
    assert docs_tables.render(text) == text, (
        f"{page.relative_to(ROOT)} is stale: run `python -m scripts.docs_tables`"
    )


def test_every_table_is_in_a_page():
    """The CLI's tables lived in the README, copied by hand: they lacked
    `update` and `create --cache`. Each table is now generated into a page."""
    placed = [name for page in PAGES for name in docs_tables.blocks_in(page.read_text())]
    assert sorted(placed) == sorted(docs_tables.TABLES)


def test_a_changed_parser_makes_the_cli_page_stale(monkeypatch):
    """The drift check can fail: a new option shows up as a stale page."""
    real = cli.parser

    def with_an_extra_option():
        parser = real()
        parser.add_argument("--colour", help="a new option (default: none)")
        return parser

    monkeypatch.setattr(cli, "parser", with_an_extra_option)
    assert ROOT / "docs" / "cli.md" in docs_tables.stale_pages()


def test_the_cli_page_names_every_command_and_option():
    text = (ROOT / "docs" / "cli.md").read_text()
    commands = docs_tables._subcommands(cli.parser())
    assert {"update", "create"} <= set(commands)
    for name, (_, sub) in commands.items():
        assert f"| `{name}" in text, name
        for action in docs_tables._own_actions(sub):
            assert f"`{docs_tables._option_words(action)}`" in text, (name, action.dest)
    assert "`--cache N`" in text


def _exit_status(status: int, code: str) -> int:
    error = error_for(status, code, "message")
    return next((exit_ for cls, exit_ in cli.EXIT if isinstance(error, cls)), 1)


def _said(status: int) -> str:
    return dict(cli.EXIT_STATUSES)[status]


def test_exit_2_names_every_status_the_command_line_exits_2_for():
    """The README said (400, 415, 422) and --help (400/422); 405 and 413 exit
    2 as well."""
    refused = {
        entry.status
        for entry in ERROR_CODES.values()
        if isinstance(entry.status, int)
        and 400 <= entry.status < 500
        and not retryable(entry.status, entry.code)
        and _exit_status(entry.status, entry.code) == 2
    } | {401}
    assert {int(status) for status in re.findall(r"\b4\d\d\b", _said(2))} == refused


def test_exit_4_names_every_conflict_the_command_line_exits_4_for():
    """The list omitted below_high_water_mark and next_beyond_max."""
    conflicts = {
        entry.code
        for entry in ERROR_CODES.values()
        if entry.status == 409 and not retryable(409, entry.code) and _exit_status(409, entry.code) == 4
    }
    assert set(re.findall(r"[a-z]+(?:_[a-z]+)+", _said(4))) == conflicts


def test_help_says_what_the_docs_say():
    shown = " ".join(cli.parser().format_help().split())
    for status, meaning in cli.EXIT_STATUSES:
        assert f"{status} {meaning}" in shown, status


def test_the_error_page_counts_codes_by_status_from_the_catalogue():
    """docs/errors.md said "409 is five different situations" above seven 409 codes."""
    text = (ROOT / "docs" / "errors.md").read_text()
    conflicts = sum(entry.status == 409 for entry in ERROR_CODES.values())
    assert re.search(rf"^\| 409 \| {conflicts} \|", text, re.MULTILINE)
    assert not re.search(r"\b409 is \w+ different", text)


def test_a_number_out_of_range_gets_its_fields_code_as_the_catalogue_says(api):
    """The catalogue said invalid_body covers "a number too long to be an ID";
    such numbers get the field's own code."""
    assert "too long" not in ERROR_CODES["invalid_body"].meaning
    huge = 10**40
    assert api.call("batch", name="orders", body={"count": huge}).error_code == "invalid_count"
    assert api.call("admin-create", body={"name": "big", "max": huge}).error_code == "invalid_max"
    assert api.call("admin-create", body={"name": "big", "start": huge}).error_code == "invalid_start"
    assert api.call("admin-set", name="big", body={"next": huge}).error_code == "invalid_next"
    # and what the catalogue does name is invalid_body
    assert api.call("admin-set", name="big", body={}).error_code == "invalid_body"
    assert api.call("batch", name="orders", body={"count": 1, "colour": 2}).error_code == "invalid_body"


# -- every operation, in every client ----------------------------------------------

NODE_SOURCES = sorted((ROOT / "client-node" / "src").rglob("*.ts"))


def test_the_operations_table_has_every_operation_of_both_python_backends():
    """AsyncHttpBackend had only allocate; the table would have hidden it.
    Every public method of either backend (but closing) is a row, and every
    row is a method of both."""
    from idblocks import HttpBackend
    from idblocks.async_backend import AsyncHttpBackend

    rows = set(docs_tables.client_operations())
    assert rows == set(docs_tables.NODE_METHODS) == set(docs_tables.CLI_COMMANDS)
    for backend, closing in ((HttpBackend, "close"), (AsyncHttpBackend, "aclose")):
        public = {name for name in dir(backend) if not name.startswith("_")} - {closing}
        methods = {name for name in public if callable(getattr(backend, name))}
        assert methods == rows, backend.__name__


def test_the_operations_table_has_every_command_of_the_command_line():
    commands = set(docs_tables._subcommands(cli.parser()))
    operations = {command for command in docs_tables.CLI_COMMANDS.values() if command}
    assert operations | set(docs_tables.CLI_PROCEDURES) == commands
    assert not operations & set(docs_tables.CLI_PROCEDURES)


def test_every_node_method_the_table_names_is_defined_in_the_node_client():
    """By its source; tests/integration/test_client_operations.py checks the
    Node client as built, prototype chain and all."""
    source = "\n".join(path.read_text() for path in NODE_SOURCES)
    for name in filter(None, docs_tables.NODE_METHODS.values()):
        assert re.search(rf"^\s+(?:async\s+)?{name}\(", source, re.MULTILINE), name


def test_a_new_operation_makes_the_client_page_stale(monkeypatch):
    """The drift check can fail: an operation added to the core shows up as a
    stale page (and as a missing name until the Node and CLI columns say)."""
    from idblocks.operations import Operations

    def compact(self, name: str) -> None:
        """POST /admin/counters/{name}/compact: a new route."""

    monkeypatch.setattr(Operations, "compact", compact, raising=False)
    monkeypatch.setitem(docs_tables.NODE_METHODS, "compact", None)
    monkeypatch.setitem(docs_tables.CLI_COMMANDS, "compact", None)
    assert ROOT / "docs" / "client.md" in docs_tables.stale_pages()
