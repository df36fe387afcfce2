"""The documentation's commands name what exists (tests/integration/
test_docs_examples.py runs the runnable ones), the Makefile and its table
agree, `make clean` removes what the project generates, and samconfig.toml
deploys what the Deploy page says.

The commands are read from the READMEs and every page of docs/ as they are
now, so a command or a page added later is checked too.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from devserver.__main__ import parse_args as devserver_args
from idblocks import HttpBackend, RetryPolicy
from idblocks import cli as idblocks_cli
from idblocks.cli import parser as idblocks_parser
from localrun.template import ROOT
from tests.support.stub_http import StubServer

READMES = [ROOT / "README.md", ROOT / "client" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MAKEFILE = ROOT / "Makefile"
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SEPARATORS = {";", "&&", "||", "|", "&"}
# A redirection takes the word after it (and the file descriptor before it): no argument.
REDIRECTIONS = {">", ">>", "<", ">&", "&>", "<&"}
# Tools the READMEs use that this project does not install (the reader brings
# them) and shell builtins.
EXTERNAL_TOOLS = {
    *("curl", "docker", "aws", "pyenv", "git", "npx"),
    *("export", "unset", "echo", "cd", "kill", "wait", "true"),
}
ACTIVATE = "source .venv/bin/activate"
VENV_BIN = Path(sys.executable).parent


def readme_commands() -> list[tuple[str, list[str]]]:
    """(README name, argv) for every command in the READMEs' shell blocks."""
    found = []
    for readme in READMES:
        for block in SHELL_BLOCK.findall(readme.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue  # a comment line shows output
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                command: list[str] = []
                redirected = False
                for token in [*lexer, ";"]:
                    if token in SEPARATORS:
                        if command:
                            found.append((readme.relative_to(ROOT).as_posix(), command))
                        command = []
                    elif token in REDIRECTIONS:
                        if command and command[-1].isdigit():
                            command.pop()  # 2>&1's 2
                        redirected = True
                    elif redirected:
                        redirected = False  # the file (or descriptor) redirected to
                    else:
                        command.append(token)
    return found


def makefile_targets(documented_only: bool = False) -> set[str]:
    pattern = r"^([a-z][a-z-]*):(?!=).*## " if documented_only else r"^([a-z][a-z-]*):(?!=)"
    return set(re.findall(pattern, MAKEFILE.read_text(), re.MULTILINE))


def makefile_variables() -> set[str]:
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*[?:]?=", MAKEFILE.read_text(), re.MULTILINE))


def samconfig() -> dict:
    return tomllib.loads((ROOT / "samconfig.toml").read_text())


def tracked_top_level() -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return {path.split("/", 1)[0] for path in listed.stdout.splitlines()}


COMMANDS = readme_commands()


def test_the_readmes_have_commands_to_check():
    """Guards the extraction itself: an empty list would pass every check."""
    words = {argv[0] for _, argv in COMMANDS}
    assert {"make", "curl"} <= words, words
    assert len(COMMANDS) >= 10


def _check_make(argv: list[str]) -> None:
    targets = makefile_targets()
    for arg in argv[1:]:
        if arg.startswith("-"):
            continue
        name, is_variable, value = arg.partition("=")
        if is_variable:
            assert name in makefile_variables(), f"the Makefile has no variable {name}"
            if name == "DEV_ARGS":
                _check_devserver(shlex.split(value))
        else:
            assert arg in targets, f"the Makefile has no target {arg}"


def _check_devserver(args: list[str]) -> None:
    try:
        devserver_args(args)
    except SystemExit:
        pytest.fail(f"the dev server rejects {args}")


def _check_venv_tool(readme: str, argv: list[str]) -> None:
    name = argv[0]
    assert (VENV_BIN / name).exists(), f"{name} is neither in .venv/bin nor a listed external tool"
    # The command only runs as written if the README says how .venv/bin gets on PATH.
    assert ACTIVATE in (ROOT / "README.md").read_text(), f"{readme} uses {name} but never says `{ACTIVATE}`"
    if name == "idblocks":
        try:
            idblocks_parser().parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"the idblocks command line rejects {argv[1:]}")
    if name == "sam" and "--config-env" in argv:
        env = argv[argv.index("--config-env") + 1]
        assert env in samconfig(), f"samconfig.toml has no [{env}]"
    if name in ("python", "python3") and "-m" in argv:
        module = argv[argv.index("-m") + 1]
        assert importlib.util.find_spec(module) is not None, f"no module {module}"
        if module == "devserver":
            _check_devserver(argv[argv.index("-m") + 2 :])


def _check_paths(argv: list[str]) -> None:
    """Arguments that name a file of this repository name one that exists."""
    tracked = tracked_top_level()
    for arg in argv[1:]:
        path = arg.split("=", 1)[-1]
        if "://" in path or path.startswith(("/", "-")) or "/" not in path:
            continue
        if path.removeprefix("./").split("/", 1)[0] in tracked:
            assert (ROOT / path).exists(), f"{path} does not exist"


@pytest.mark.parametrize(("readme", "argv"), COMMANDS, ids=[" ".join(argv)[:60] for _, argv in COMMANDS])
def test_each_readme_command_names_something_that_exists(readme, argv):
    """`pytest --long`, `sam build` and `idblocks next orders` failed as
    written (command not found): nothing said the tools live in .venv/bin."""
    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
        argv = argv[1:]  # VAR=value in front of a command
    if not argv:
        return  # a shell variable set for the commands after it
    word = argv[0]
    if word in ("source", "."):
        assert (ROOT / argv[1]).exists(), f"{argv[1]} does not exist"
    elif word == "make":
        _check_make(argv)
    elif word in EXTERNAL_TOOLS:
        pass
    elif word.startswith((".venv/bin/", "./")) or "/" in word:
        name = word.removeprefix(".venv/bin/")
        if word.startswith(".venv/bin/"):
            _check_venv_tool(readme, [name, *argv[1:]])
        else:
            assert (ROOT / word).exists(), f"{word} does not exist"
    else:
        _check_venv_tool(readme, argv)
    _check_paths(argv)


def test_the_venv_activation_the_readme_names_is_what_make_venv_creates():
    """The README's way onto PATH must point at the environment the Makefile builds."""
    assert re.search(r"^VENV := \.venv$", MAKEFILE.read_text(), re.MULTILINE)
    assert (VENV_BIN / "activate").exists()
    assert VENV_BIN.parent.resolve() == (ROOT / ".venv").resolve()


# -- the Makefile and the Commands table ---------------------------------------


DEVELOPMENT = ROOT / "docs" / "development.md"
DEPLOY = ROOT / "docs" / "deploy.md"


def commands_table() -> set[str]:
    text = DEVELOPMENT.read_text()
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `make ([a-z-]+)`", section, re.MULTILINE))


# What make test ran, one after another, before it ran several at a time:
# each must still run, and before the suites.
TEST_CHECKS = (
    "ruff check .",
    "ruff format --check .",
    "\nmypy\n",
    "mypy --python-version 3.11 client/idblocks",
    "cfn-lint template.yaml",
    "sam validate --lint\n",
    "cfn-lint build/sar/template.yaml",
    "npx eslint .",
    "openapi-spec-validator docs/openapi.json",
    "npx redocly lint ../docs/openapi.json",
    "checkov -f template.yaml -f build/sar/template.yaml",
    "sam build",
    "mkdocs build --strict",
    "node --test dist/test/unit/",
)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_every_check_several_at_a_time_and_then_the_suites():
    """make test's checks and installs, which ran one after another, run
    TEST_JOBS at a time with each target's output kept whole; none is left
    out, and the suites start once all have passed."""
    shown = subprocess.run(
        ["make", "-n", "-f", str(MAKEFILE), "test", "TEST_JOBS=3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    setup = "lint security build docs node-test api-tools iam-simulator"
    assert f"-j3 --output-sync=target {setup}" in shown, shown
    suites = shown.index("python -m pytest -n auto --dist loadfile")
    for check in TEST_CHECKS:
        assert -1 < shown.find(check) < suites, f"make test no longer runs {check.strip()!r} first"


def test_every_make_target_is_in_the_commands_table_and_in_make_help():
    """The table left out help, venv, lint, security, build, unit and clean."""
    documented = makefile_targets(documented_only=True)
    assert makefile_targets() == documented, "a target without a `## ` description is missing from make help"
    assert commands_table() == documented
    shown = subprocess.run(
        ["make", "-s", "-f", str(MAKEFILE), "help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert set(re.findall(r"^  make (\S+)", shown.stdout, re.MULTILINE)) == documented


# -- make clean ----------------------------------------------------------------


def generated_paths() -> list[str]:
    """One instance of every .gitignore pattern, and of those that appear in
    subdirectories (build output of the client, bytecode, egg-info)."""
    paths = []
    for line in (ROOT / ".gitignore").read_text().splitlines():
        pattern = line.strip()
        if pattern and not pattern.startswith("#"):
            paths.append(pattern.rstrip("/").replace("*", "made"))
    return [*paths, "client/build", "client/idblocks.egg-info", "devserver/__pycache__", "bench/.cache"]


def _make_clean(tree: Path, *variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-f", str(MAKEFILE), "-C", str(tree), "clean", *variables],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_clean_removes_what_the_project_generates_and_keeps_dev_state_unless_asked(tmp_path):
    """`make clean` left .hypothesis/, client/build, client/*.egg-info and
    bench/.cache behind. It runs here on a scratch tree, never this checkout."""
    generated = generated_paths()
    for relative in generated:
        path = tmp_path / relative
        path.mkdir(parents=True, exist_ok=True)
        (path / "file").write_text("generated")
    for kept in ("client/idblocks/__init__.py", "bench/results/client.json", "README.md"):
        (tmp_path / kept).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / kept).write_text("source")

    done = _make_clean(tmp_path)
    assert done.returncode == 0, done.stderr
    left = [relative for relative in generated if (tmp_path / relative).exists()]
    assert left == [".dev-state"], f"make clean left {left}"
    assert "DEV_STATE=1" in done.stdout
    for kept in ("client/idblocks/__init__.py", "bench/results/client.json", "README.md"):
        assert (tmp_path / kept).read_text() == "source"

    done = _make_clean(tmp_path, "DEV_STATE=1")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".dev-state").exists()
    assert (tmp_path / "README.md").exists()


# -- samconfig.toml and the README ---------------------------------------------


def readme_parameter_defaults() -> dict[str, str]:
    """The Deploy page's parameter table (| Parameter | Default | |): each
    parameter's default as it says."""
    text = DEPLOY.read_text()
    section = text.split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("\n| Parameter | Default | |\n", 1)[1].split("\n\n", 1)[0]
    defaults = {}
    for row in re.findall(r"^\|(.+)\|$", table, re.MULTILINE):
        cells = [cell.strip() for cell in row.split("|")]
        names = re.findall(r"`(\w+)`", cells[0])
        values = [value.strip().strip("`") for value in cells[1].split(" / ")]
        if names and len(names) == len(values):
            defaults.update(zip(names, values, strict=True))
    return defaults


def test_samconfig_default_deploys_what_the_readme_table_says(template):
    """[default] deployed TableDeletionProtection=false and LogLevel=DEBUG
    while the README's table says true and INFO."""
    table = readme_parameter_defaults()
    assert {"TableDeletionProtection", "LogLevel", "ClientAuth"} <= set(table)
    overrides = samconfig()["default"]["deploy"]["parameters"]["parameter_overrides"].split()
    for name, value in (pair.split("=", 1) for pair in overrides):
        said = table.get(name)
        assert said == value, f"[default] deploys {name}={value}, the README says {said}"
        assert str(template.raw["Parameters"][name]["Default"]) == value, name


def test_samconfig_points_at_the_page_that_has_the_parameter_table():
    """samconfig.toml sent readers to README.md's parameter table, which
    had moved to docs/deploy.md."""
    lines = (ROOT / "samconfig.toml").read_text().splitlines()
    comments = " ".join(line.lstrip("# ") for line in lines if line.startswith("#"))
    (page,) = re.findall(r"(\S+\.md)'s parameter table", comments)
    assert ROOT / page == DEPLOY, (
        f"samconfig.toml points at {page}; the table is in {DEPLOY.relative_to(ROOT)}"
    )
    assert readme_parameter_defaults()


def test_the_readme_names_every_samconfig_environment():
    deploy = DEPLOY.read_text().split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    for env in samconfig():
        if env not in ("version", "default"):
            assert f"--config-env {env}" in deploy, f"the README's Deploy section never names [{env}]"


# -- make's first run ----------------------------------------------------------


def _fake_tree(tree: Path) -> None:
    """A scratch tree with this Makefile, its requirement files and a .venv
    whose python does nothing: the recipes run, nothing is installed."""
    shutil.copy(MAKEFILE, tree / "Makefile")
    for requirement in ("requirements/dev.txt", "requirements/lock.txt", "layers/core/requirements.txt"):
        (tree / requirement).parent.mkdir(parents=True, exist_ok=True)
        (tree / requirement).write_text("")
    (tree / "client").mkdir()
    (tree / "client" / "pyproject.toml").write_text("")
    python = tree / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)


def _make_dev(tree: Path) -> str:
    done = subprocess.run(
        ["make", "-s", "-C", str(tree), "dev", "PYTHON313=/bin/true"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dev_says_once_that_the_first_run_builds_the_environment(tmp_path):
    """The first `make dev` spent minutes building .venv and said nothing."""
    _fake_tree(tmp_path)
    first = _make_dev(tmp_path)
    assert first.count("First run") == 1, first
    assert re.search(r"a few minutes \(about \d+ ", first), first
    assert "First run" not in _make_dev(tmp_path)
    # stale requirements rebuild quietly: that is not a first run
    (tmp_path / "requirements" / "dev.txt").write_text("# changed\n")
    assert "First run" not in _make_dev(tmp_path)


def deploy_section() -> str:
    """The Deploy section of the Deploy page: what a first deploy reads."""
    return DEPLOY.read_text().split("\n## Deploy\n", 1)[1].split("\n### ", 1)[0]


def test_the_first_deploy_on_a_new_account_needs_no_concurrency_quota(template):
    """The defaults reserved 205 units of Lambda concurrency, and Lambda keeps
    100 unreserved: an account below 305, as every new one is, failed the
    first deploy. The page says the defaults reserve none, why, and what
    production reserves and needs."""
    defaults = template.parameters
    assert (defaults["ReservedConcurrency"], defaults["AdminReservedConcurrency"]) == ("0", "0")
    section = " ".join(deploy_section().split())
    assert "**The first deploy on a new account.**" in section
    assert "reserve no Lambda concurrency" in section
    assert "10 or 50" in section
    assert "decreases account's UnreservedConcurrentExecution below its minimum value" in section
    assert "**Production values.**" in section
    assert "205 in all" in section
    assert "at least 305" in section


def test_the_deploy_page_says_what_to_do_after_a_failed_first_deploy():
    """A failed first create rolled back and left the log groups, and the
    page said nothing of a retry. It now says what a failed create leaves
    (the counters table, empty), how to retry, and how to delete the table."""
    section = deploy_section()
    assert "**If the first deploy fails.**" in section
    lines = [
        line for block in SHELL_BLOCK.findall(section) for line in block.replace("\\\n", " ").splitlines()
    ]
    commands = [" ".join(shlex.split(line.split("#")[0])[:3]) for line in lines if line.strip()]
    for expected in (
        "aws cloudformation describe-stack-events",
        "aws cloudformation delete-stack",
        "aws cloudformation wait",
        "aws dynamodb update-table",
        "aws dynamodb delete-table",
    ):
        assert expected in commands, expected
    text = " ".join(section.split())
    assert "RetainExceptOnCreate" in text
    assert "ROLLBACK_FAILED" in text


def test_the_deploy_page_says_how_to_change_a_parameter_safely():
    """With AWS::LanguageExtensions the parameters' values are written into
    the stack's template: an update that reuses it keeps the old values and
    reports success. The page says so, and to change parameters with
    `sam deploy`, which sends the template."""
    section = DEPLOY.read_text().split("\n### Changing a parameter\n", 1)[1].split("\n### ", 1)[0]
    text = " ".join(section.split())
    assert "**Always with the template.**" in text
    assert "--use-previous-template" in text
    assert '"Use current template"' in text
    assert "keeps the old values" in text
    commands = [line for block in SHELL_BLOCK.findall(section) for line in block.splitlines()]
    assert any(line.startswith("sam deploy --parameter-overrides") for line in commands)
    assert "<!-- generated: parameter-changes" in section


def test_the_first_deploy_is_followed_by_creating_the_counters(template):
    """AutoCreateCounters is false by default: without a create step, every
    next of a new stack answered 404 counter_not_found."""
    assert template.parameters["AutoCreateCounters"] == "false"
    section = deploy_section()
    assert "**Create your counters.**" in section
    lines = [
        line for block in SHELL_BLOCK.findall(section) for line in block.replace("\\\n", " ").splitlines()
    ]
    commands = [argv for argv in (shlex.split(line.split("#")[0]) for line in lines) if argv]
    create = [argv for argv in commands if argv[:2] == ["idblocks", "create"]]
    assert create, "no idblocks create in the Deploy section"
    idblocks_parser().parse_args(create[0][1:])  # a command the command line takes
    assert "AdminPolicyArn" in section


UNPUBLISHED = re.compile(r"pip install \"?idblocks\b|npm install @idblocks/client")


def test_no_page_installs_a_package_that_is_not_published():
    """Neither client is on PyPI or npm: the pages said `pip install
    idblocks` and `npm install @idblocks/client`, which install nothing of
    this project. Such a command may appear only where a page says so."""
    pages = [*READMES, ROOT / "client-node" / "README.md"]
    for page in pages:
        text = " ".join(page.read_text().split())
        for found in UNPUBLISHED.finditer(text):
            around = text[max(0, found.start() - 120) : found.end() + 40]
            assert "not published" in around or "finds nothing" in around, (page.relative_to(ROOT), around)
    for page in (
        ROOT / "client" / "README.md",
        ROOT / "client-node" / "README.md",
        ROOT / "docs" / "client.md",
    ):
        text = " ".join(page.read_text().split())
        assert "not published" in text, page
        assert "make dist" in text, page


@pytest.mark.parametrize(
    ("page", "link"),
    [("README.md", "docs/guarantees.md#not-guaranteed"), ("docs/index.md", "guarantees.md#not-guaranteed")],
)
def test_where_a_front_page_offers_invoice_numbers_it_says_ids_can_be_skipped_and_how_to_skip_fewest(
    page, link
):
    """The README (and the site's front page) offered idblocks for invoice
    numbers without saying that IDs can be skipped: said where it offers
    them (before the first section), with the way of taking IDs that skips
    fewest and a link to what can still skip one."""
    intro = " ".join((ROOT / page).read_text().split("\n## ", 1)[0].split())
    assert "invoice numbers" in intro
    assert "can be skipped" in intro
    for way in ("`next`", "`cache` is 1", "`Idempotency-Key`", "rather than from a block", "skips fewest"):
        assert way in intro, way
    assert f"]({link})" in intro
    guarantees = (ROOT / "docs" / "guarantees.md").read_text()
    assert "\n## Not guaranteed\n" in guarantees
    assert "**No gaps.**" in guarantees.split("\n## Not guaranteed\n", 1)[1]


def _sentence_of(page: Path, start: str) -> str:
    """The sentence of ``page`` that begins with ``start``, on one line."""
    text = " ".join(page.read_text().split())
    at = text.index(start)
    return text[at : text.index(". ", at) + 1]


def _cli_status_and_waits(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[float]]:
    """The command line's exit status for `next` at ``endpoint``, and the
    back-offs it waited (recorded, not waited)."""
    waits: list[float] = []
    backend = functools.partial(HttpBackend, retry=RetryPolicy(sleep=waits.append))
    monkeypatch.setattr(idblocks_cli, "HttpBackend", backend)
    monkeypatch.delenv("IDBLOCKS_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        idblocks_cli.main(["--endpoint", endpoint, "next", "orders"])
    assert isinstance(exited.value.code, int)
    return exited.value.code, waits


def test_the_command_line_page_says_what_it_does_when_nothing_answers_as_it_does_it(monkeypatch):
    """docs/cli.md said that `idblocks` retries for a few seconds when
    nothing answers; it says so at once, which is right (a wrong address is
    no outage). Each claim of the page's paragraph, its exit status and its
    "at once", is what the command line does: against a port where nothing
    listens, and https:// against a server that speaks plain HTTP."""
    page = ROOT / "docs" / "cli.md"
    with socket.socket() as held, StubServer([]) as plain:
        held.bind(("127.0.0.1", 0))  # bound, not listening: refused
        refused, https = f"http://127.0.0.1:{held.getsockname()[1]}", plain.url.replace("http", "https", 1)
        cases = {
            "When nothing answers at the endpoint": refused,
            "An `https://` endpoint whose server answers in plain HTTP": https,
        }
        for start, endpoint in cases.items():
            claim = _sentence_of(page, start)
            said = re.search(r"\(exit (\d)\)", claim)
            assert said, claim
            assert "at once" in claim, claim
            assert "retries" not in claim, claim
            status, waits = _cli_status_and_waits(endpoint, monkeypatch)
            assert (status, waits) == (int(said[1]), []), (claim, status, waits)
