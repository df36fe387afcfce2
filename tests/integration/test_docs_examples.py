"""Every example of the documentation runs as written, twice in a row,
against fresh dev servers: the READMEs and every page of docs/, as they are
now, so an example added later runs too.

An example is a fenced block of shell (sh, bash, shell, console) or python.
A block that cannot run here says why on the line before its fence, one of
NOT_RUN's reasons:

    <!-- not-run: needs AWS -->

(tests/infra/test_docs.py still checks that its commands name what exists).
Every other block runs from the repository's root, in a shell as a reader's
is: bash -e with the PATH this test was given without .venv/bin (a block
that uses a tool of .venv runs `source .venv/bin/activate` itself, as the
reader must), no virtualenv active, no make of ours running it. Python
blocks run with this interpreter, the environment's python the README says
to use. pip runs offline (no index, and no build isolation: the
environment's own setuptools builds a local project), so a block may
install a project of this repository but never a package from a registry
("installs packages" is the reason for those). What a block installs into
the environment is uninstalled afterwards. An address http://127.0.0.1:PORT in a block is a dev
server: 3000 one with the defaults, any other port one started with the
`make dev DEV_ARGS="--port PORT ..."` its page gives; each is started fresh
for this test, on a free port and a counters file of its own, and the
address in the block is rewritten to it. Running every block a second time
against the same servers is what a reader who tries the pages twice does:
an example that only works once (a name it creates, a start it sets) fails.

The first run reads the pages in a reader's order (the README, then docs/ as
mkdocs.yml's nav lists them, then the client's README), and checks every
answer a page shows: a shell command followed by a comment that is a JSON
object (on its line, or on the next) must print that object, "..." standing
for what the page says may differ.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from devserver.process import DevServer, subprocess_environment
from localrun.template import ROOT


def reading_order() -> list[Path]:
    """The README, docs/ in mkdocs.yml's nav order (any page left out of it
    after them), then the client packages' READMEs."""

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, dict):
            return [page for value in nav.values() for page in pages(value)]
        return [page for item in nav for page in pages(item)] if isinstance(nav, list) else []

    nav = [ROOT / "docs" / page for page in pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])]
    rest = [page for page in sorted((ROOT / "docs").rglob("*.md")) if page not in nav]
    return [
        ROOT / "README.md",
        *nav,
        *rest,
        ROOT / "client" / "README.md",
        ROOT / "client-node" / "README.md",
    ]


DOC_FILES = reading_order()
NOT_RUN = {"starts a server", "needs AWS", "needs Docker", "installs packages"}
EXAMPLE = re.compile(
    r"(?:^<!-- not-run: (?P<reason>[^>]*?) -->\n)?"
    r"^```(?P<lang>sh|bash|shell|console|python)\n(?P<body>.*?)^```",
    re.MULTILINE | re.DOTALL,
)
DEV_ARGS = re.compile(r"make dev DEV_ARGS=\"([^\"]*)\"")
LOCAL_URL = re.compile(r"http://127\.0\.0\.1:(\d+)")
DEFAULT_PORT = 3000
VENV_BIN = Path(sys.executable).parent
# Generous: an example is a handful of requests, but the machine may be busy.
BLOCK_TIMEOUT = 180


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    lang: str
    body: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples() -> list[Example]:
    found = []
    for page in DOC_FILES:
        text = page.read_text()
        for match in EXAMPLE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(Example(page, line, match["lang"], match["body"], match["reason"]))
    return found


def server_args(page: Path, port: int) -> tuple[str, ...]:
    """The dev server options the page starts its server on ``port`` with,
    without the port (the test gives its own). Its counters file names the
    server: two pages naming one file share a server, as a reader's would."""
    if port == DEFAULT_PORT:
        return ()
    candidates = set()
    for line in DEV_ARGS.findall(page.read_text()):
        args = shlex.split(line)
        if "--port" in args and args[args.index("--port") + 1] == str(port):
            at = args.index("--port")
            candidates.add(tuple(args[:at] + args[at + 2 :]))
    assert len(candidates) == 1, (
        f"{page.relative_to(ROOT)} uses 127.0.0.1:{port}, but gives {len(candidates)} ways of starting "
        f'a server there (make dev DEV_ARGS="--port {port} ..."); it needs exactly one'
    )
    return candidates.pop()


class Servers:
    """The dev servers the examples talk to, started on first use."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: dict[tuple[str, ...], DevServer] = {}

    def url_for(self, args: tuple[str, ...]) -> str:
        if args not in self.started:
            state = self.directory / f"state-{len(self.started)}.json"
            kept = list(args)
            if "--state-file" in kept:  # the test's own file stands in for the page's
                at = kept.index("--state-file")
                del kept[at : at + 2]
            self.started[args] = DevServer("--fresh", *kept, state_file=state).start()
        return self.started[args].url

    def stop(self) -> None:
        for server in self.started.values():
            server.stop()


# A comment that is a JSON object (the answer a command prints), and what
# the instrumented block prints after the command that answer is for.
ANSWER = re.compile(r"#\s*(\{[^{}]*\})")
MARK = "@@answer {}"


def with_answers(body: str) -> tuple[str, list[str]]:
    """A shell block with a line printed after each command whose answer
    the page shows, and those answers, in order."""
    lines = body.splitlines()
    out: list[str] = []
    answers: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        found = re.search(r"\s" + ANSWER.pattern, line) or (
            ANSWER.match(following.strip()) if following.lstrip().startswith("#") else None
        )
        if found:
            out.append(f"printf '\\n{MARK.format(len(answers))}\\n'")  # curl ends without a newline
            answers.append(found[1])
    return "\n".join(out) + "\n", answers


def answer_matches(shown: str, printed: str) -> bool:
    """The printed line is the answer shown ("..." standing for anything), as JSON."""
    if "..." in shown:
        pattern = ".*?".join(re.escape(part) for part in re.sub(r"\s", "", shown).split("..."))
        return re.fullmatch(pattern, re.sub(r"\s", "", printed)) is not None
    try:
        return json.loads(shown) == json.loads(printed)
    except ValueError:
        return False


def wrong_answers(example: Example, answers: list[str], stdout: str) -> list[str]:
    """The answers ``example`` shows that its commands did not print."""
    segments = re.split(r"^@@answer \d+\n", stdout, flags=re.MULTILINE)
    wrong = []
    for shown, segment in zip(answers, segments, strict=False):
        printed = (segment.strip().splitlines() or [""])[-1]
        if not answer_matches(shown, printed):
            wrong.append(f"{example.where}: the page shows {shown}, the command printed {printed}")
    return wrong


def readers_environment() -> dict[str, str]:
    """This process's environment as a reader's shell has it: without
    .venv/bin on PATH (make puts it there for the tests), no virtualenv,
    no make, none of the client's settings; pip offline."""
    env = subprocess_environment()
    for name in ("IDBLOCKS_URL", "IDBLOCKS_AUTH", "VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join(
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry and Path(entry).resolve() != VENV_BIN.resolve()
    )
    env |= {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return env


def run(example: Example, servers: Servers, marked: bool = False) -> subprocess.CompletedProcess[str]:
    body = with_answers(example.body)[0] if marked and example.lang != "python" else example.body
    for port in sorted({int(port) for port in LOCAL_URL.findall(body)}):
        url = servers.url_for(server_args(example.page, port))
        body = body.replace(f"http://127.0.0.1:{port}", url)
    env = readers_environment()
    if example.lang == "python":
        argv = [sys.executable, "-c", body]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", body]
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT, check=False
    )


EXAMPLES = examples()
RUNNABLE = [example for example in EXAMPLES if example.not_run is None]


def test_the_extraction_finds_the_examples():
    """Guards the extraction itself: finding nothing would pass everything."""
    assert len(RUNNABLE) >= 8
    bodies = "\n".join(example.body for example in RUNNABLE)
    for word in (
        "curl ",
        "idblocks create",
        "HttpBackend(",
        "FailoverBackend",
        ":3001",
        ":3002",
        "openapi-python-client generate",
        "from idblocks_client import",
        "npx openapi-typescript",
    ):
        assert word in bodies, word
    assert {example.lang for example in RUNNABLE} >= {"sh", "python"}


def test_a_block_runs_in_a_shell_without_the_environment_on_path():
    """Blocks ran with .venv/bin on PATH, so a page that used a tool of
    .venv without saying `source .venv/bin/activate` passed here and failed
    for its reader ("openapi-python-client: command not found")."""
    env = readers_environment()
    assert VENV_BIN.resolve() not in [
        Path(entry).resolve() for entry in env["PATH"].split(os.pathsep) if entry
    ]
    assert "VIRTUAL_ENV" not in env


def test_a_block_that_runs_a_node_tool_of_the_repository_installs_it_first():
    """The tools of api-tools/ and client-node/ are in their node_modules,
    which a fresh clone does not have: npx there found nothing installed
    (and offered to download whatever has the name) until `make
    api-tools`, which the page did not say. Here they are installed, so
    the run above cannot see it; the block must say it."""
    installs = {"api-tools": "make api-tools", "client-node": "make node"}
    missing = []
    for example in RUNNABLE:
        for folder, make in installs.items():
            at = example.body.find(f"cd {folder} && npx ")
            if at != -1 and make not in example.body[:at]:
                missing.append(f"{example.where}: npx in {folder}/ without `{make}` before it")
    assert not missing


def test_every_block_that_is_not_run_says_why_in_known_words():
    unknown = {
        (example.where, example.not_run) for example in EXAMPLES if example.not_run not in NOT_RUN | {None}
    }
    assert not unknown, f"not-run reasons are one of {sorted(NOT_RUN)}"


def test_every_not_run_mark_is_on_the_line_before_a_fence():
    """A mark with a blank line (or anything) before its fence marks nothing,
    and the block it meant would run."""
    marks = sum(len(re.findall(r"^<!-- not-run:", page.read_text(), re.MULTILINE)) for page in DOC_FILES)
    assert marks == sum(example.not_run is not None for example in EXAMPLES)


def test_a_block_that_is_not_run_needs_what_its_reason_says():
    """A runnable example marked not-run to hide a failure would still be
    unchecked: each reason must be visible in the block."""
    needs = {
        "starts a server": r"make dev|python -m devserver",
        "needs AWS": r"amazonaws\.com|sam (deploy|build)|aws |IamAuth",
        "needs Docker": r"docker ",
        "installs packages": r"pip install|npm install",
    }
    wrong = [
        example.where
        for example in EXAMPLES
        if example.not_run in needs and not re.search(needs[example.not_run], example.body)
    ]
    assert not wrong


def installed() -> set[str]:
    """The distributions installed in this environment."""
    return {dist.metadata["Name"] for dist in importlib.metadata.distributions()}


def test_every_runnable_example_runs_twice_against_fresh_dev_servers(tmp_path):
    servers = Servers(tmp_path)
    failures = []
    before = installed()
    try:
        for attempt in (1, 2):
            for example in RUNNABLE:
                # The first run is a reader's first: the answers the pages show are checked.
                done = run(example, servers, marked=attempt == 1)
                output = done.stdout + done.stderr
                # curl exits 0 on an HTTP error; the API's errors are JSON with "error".
                if done.returncode != 0 or '{"error"' in output:
                    failures.append(f"run {attempt}, {example.where} (exit {done.returncode}):\n{output}")
                elif attempt == 1 and example.lang != "python":
                    failures += wrong_answers(example, with_answers(example.body)[1], done.stdout)
    finally:
        servers.stop()
        # What a page installed (the client it generates) goes: the environment is the tests'.
        added = sorted(installed() - before)
        if added:
            uninstall = [sys.executable, "-m", "pip", "uninstall", "--yes", *added]
            subprocess.run(uninstall, capture_output=True, timeout=BLOCK_TIMEOUT, check=True)
    assert not failures, "\n\n".join(failures)


def test_the_answers_a_page_shows_are_found_and_compared():
    """Guards the answer check itself: finding none would pass every page."""
    body, answers = with_answers(
        'curl -X POST x\n# {"id":1}\nidblocks next orders   # {"id": ...}\necho done\n'
    )
    assert answers == ['{"id":1}', '{"id": ...}']
    assert body.count("@@answer") == 2
    assert answer_matches('{"id": ...}', '{"id": 102}')
    assert answer_matches('{"counter":"orders","id":1}', '{"counter": "orders", "id": 1}')
    assert not answer_matches('{"counter":"orders","id":1}', '{"counter":"orders","id":2}')
    shown = sum(len(with_answers(example.body)[1]) for example in RUNNABLE if example.lang != "python")
    assert shown >= 8


@pytest.mark.parametrize("reason", sorted(NOT_RUN))
def test_each_reason_is_used(reason):
    """A reason nobody uses is a rule nobody keeps: drop it."""
    assert any(example.not_run == reason for example in EXAMPLES), reason
