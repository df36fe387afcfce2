"""The packages as users get them: `make dist` builds the client's wheel and
sdist (twine checks their metadata) and the Node client's tarball, and each
is installed into an environment that has nothing of this repository, then
takes IDs from a dev server through it. Python: a fresh venv with the wheel,
another with the wheel and its [async] extra, a third with the sdist; the
dependencies come through pip at the versions requirements/lock.txt pins
(pip's cache serves what `make venv` downloaded). Node: a fresh ES module
project with the tarball (its dependencies through npm, preferring npm's
cache), run as ESM, from CommonJS by import(), and type-checked by tsc; and
a TypeScript project made from the files client-node/README.md gives and
set up by the commands it gives, as written, compiled by the TypeScript they
install and run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from localrun.environment import scrubbed_environment
from localrun.template import ROOT

VERSION = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["version"]
LOCK = ROOT / "requirements" / "lock.txt"
NODE_DIR = ROOT / "client-node"

pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None or shutil.which("make") is None,
    reason="make dist needs make and npm (make node checks for Node.js)",
)


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def clean_env() -> dict[str, str]:
    """No PYTHONPATH, no virtualenv of ours, no source tree on any path."""
    env = scrubbed_environment()
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))
    )
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    env = clean_env() | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{clean_env()['PATH']}"}
    run(["make", "-s", "-C", str(ROOT), "dist", f"DIST_DIR={out}"], cwd=ROOT, env=env)
    built = {
        "wheel": out / f"idblocks-{VERSION}-py3-none-any.whl",
        "sdist": out / f"idblocks-{VERSION}.tar.gz",
        "tarball": out / f"idblocks-client-{VERSION}.tgz",
    }
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in built.values())
    return built


def test_the_wheel_carries_the_package_its_types_and_license_and_nothing_else(dist):
    names = set(zipfile.ZipFile(dist["wheel"]).namelist())
    info = f"idblocks-{VERSION}.dist-info"
    assert "idblocks/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    assert {name.split("/", 1)[0] for name in names} == {"idblocks", info}
    metadata = zipfile.ZipFile(dist["wheel"]).read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata


# -- Python ------------------------------------------------------------------------

TAKE_IDS = """
import importlib.metadata, json, pathlib, sys
import idblocks
from idblocks import HttpBackend, NoAuth, Sequence

url, counter = sys.argv[1], sys.argv[2]
# The installed package, not the repository's client/.
assert pathlib.Path(idblocks.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve())
with Sequence(HttpBackend(url, auth=NoAuth()), counter) as seq:
    ids = [seq.next_id() for _ in range(3)] + list(seq.take(4))
try:
    import httpx  # noqa: F401
    from idblocks import AsyncSequence
    from idblocks.async_backend import AsyncHttpBackend
    import asyncio

    async def take_async():
        async with AsyncSequence(AsyncHttpBackend(url, auth=NoAuth()), counter + "-async") as seq:
            return [await seq.next_id() for _ in range(3)]

    async_ids = asyncio.run(take_async())
except ImportError as exc:
    async_ids = repr(exc)
print(json.dumps({"version": importlib.metadata.version("idblocks"), "ids": ids, "async": async_ids}))
"""

# What a user's type checker sees through the installed package: its
# annotations (py.typed), so a wrong use is an error of the user's code.
USER_CODE = """
from idblocks import Sequence


def order_number(orders: Sequence) -> str:
    return orders.next_id()
"""


def fresh_venv(tmp_path: Path, name: str, requirement: str) -> Path:
    venv = tmp_path / name
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    # This environment's pip installs into the new one; the lock pins the dependencies.
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "-c", str(LOCK)]
    run([*pip, requirement], cwd=tmp_path)
    return python


def take_ids(python: Path, tmp_path: Path, url: str, counter: str) -> dict[str, Any]:
    out = run([str(python), "-I", "-c", TAKE_IDS, url, counter], cwd=tmp_path)
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("artifact", "extra"),
    [("wheel", ""), ("wheel", "[async]"), ("sdist", "")],
    ids=["wheel", "wheel-async", "sdist"],
)
def test_a_fresh_venv_with_the_built_package_takes_ids_from_the_dev_server(
    dist, dev, tmp_path, artifact, extra
):
    """Nothing built the packages, and the tests imported the client from the source tree."""
    python = fresh_venv(tmp_path, "venv", f"idblocks{extra} @ {dist[artifact].as_uri()}")
    counter = f"artifact-{artifact}{extra.strip('[]')}"
    taken = take_ids(python, tmp_path, dev.url, counter)
    assert taken["version"] == VERSION
    assert taken["ids"] == list(range(1, 8))
    if extra:
        assert taken["async"] == [1, 2, 3]
    else:
        assert "httpx" in taken["async"], "without [async], httpx is not installed"
    cli = run([str(python.parent / "idblocks"), "--endpoint", dev.url, "next", counter], cwd=tmp_path)
    assert json.loads(cli)["id"] > 7


def test_a_users_type_checker_reads_the_installed_packages_annotations(dist, tmp_path):
    """Without py.typed, mypy skips the package: `import-untyped`, and the
    wrong return type below would pass unseen."""
    python = fresh_venv(tmp_path, "venv", f"idblocks @ {dist['wheel'].as_uri()}")
    (tmp_path / "user.py").write_text(USER_CODE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-executable",
            str(python),
            "--config-file",
            "",
            "user.py",
        ],
        cwd=tmp_path,
        env=clean_env() | {"MYPY_CACHE_DIR": str(tmp_path / ".mypy_cache")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = re.findall(r"^user\.py:\d+: error: (.*)$", done.stdout, re.MULTILINE)
    assert found == ['Incompatible return value type (got "int", expected "str")  [return-value]'], (
        done.stdout
    )


# -- Node --------------------------------------------------------------------------

ESM = """
import { HttpBackend, Sequence } from "@idblocks/client";

const seq = new Sequence(new HttpBackend(process.argv[2]), process.argv[3]);
const ids = [await seq.next(), await seq.next()];
ids.push(...(await seq.take(3)));
await seq.close();
console.log(JSON.stringify(ids));
"""

# CommonJS code loads the ES module with import(), which every Node the
# package supports (20 and later) has.
CJS = """
(async () => {
  const { HttpBackend, Sequence } = await import("@idblocks/client");
  const seq = new Sequence(new HttpBackend(process.argv[2]), process.argv[3]);
  const ids = [await seq.next(), await seq.next()];
  await seq.close();
  console.log(JSON.stringify(ids));
})();
"""

TYPED = """
import { HttpBackend, Sequence } from "@idblocks/client";

const seq: Sequence = new Sequence(new HttpBackend("http://127.0.0.1:9"), "typed");
export const id: number = await seq.next();
export const wrong: string = await seq.next();
"""


@pytest.fixture(scope="module")
def node_project(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("node-project")
    (project / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    npm = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"]
    run([*npm, str(dist["tarball"])], cwd=project)
    installed = json.loads((project / "node_modules" / "@idblocks" / "client" / "package.json").read_text())
    assert installed["version"] == VERSION
    (project / "esm.mjs").write_text(ESM)
    (project / "cjs.cjs").write_text(CJS)
    (project / "typed.mts").write_text(TYPED)
    return project


def test_a_fresh_node_project_takes_ids_through_the_tarball_as_esm_and_from_commonjs(node_project, dev):
    """The Node package was tried from npm pack only by hand."""
    node = shutil.which("node")
    assert node
    esm = json.loads(run([node, "esm.mjs", dev.url, "tarball-esm"], cwd=node_project))
    assert esm == [1, 2, 3, 4, 5]
    cjs = json.loads(run([node, "cjs.cjs", dev.url, "tarball-cjs"], cwd=node_project))
    assert cjs == [1, 2]


def tsc(project: Path, *options: str, compiler: Path | None = None) -> tuple[list[str], str]:
    """The error codes tsc reports in ``project``, and what it printed: the
    project's own tsc, or ``compiler``."""
    compiler = compiler or project / "node_modules" / "typescript" / "bin" / "tsc"
    done = subprocess.run(
        [shutil.which("node") or "node", str(compiler), *options],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return re.findall(r"error (TS\d+)", done.stdout), done.stdout


def test_typescript_reads_the_tarballs_declarations(node_project):
    """A consumer's tsc resolves the package's types through its exports map:
    the wrong assignment is the one error."""
    options = ["--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext", "--target", "es2022"]
    errors, said = tsc(
        node_project, *options, "typed.mts", compiler=NODE_DIR / "node_modules" / "typescript" / "bin" / "tsc"
    )
    assert errors == ["TS2322"], said
    assert "typed.mts(6," in said, said


# -- a TypeScript project, as client-node/README.md sets one up ---------------------

README = NODE_DIR / "README.md"
TITLED_BLOCK = re.compile(r'^```\w+ title="(?P<title>[^"]+)"\n(?P<body>.*?)^```', re.MULTILINE | re.DOTALL)
SHELL_BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
# Where the README's commands put the project and find the tarball: the
# test's project and the tarball it built stand in for them.
READERS_PROJECT = "~/my-service"
READERS_TARBALL = f"/path/to/idblocks/dist/idblocks-client-{VERSION}.tgz"


def readme_section(title: str) -> str:
    """The part of client-node/README.md under ``title``, up to the next heading."""
    return re.split(r"\n#{2,6} ", README.read_text().split(f"\n{title}\n", 1)[1], maxsplit=1)[0]


def readme_files() -> dict[str, str]:
    """The files client-node/README.md gives a TypeScript project, by name."""
    section = readme_section("### In a TypeScript project")
    return {found["title"]: found["body"] for found in TITLED_BLOCK.finditer(section)}


def readme_commands(project: Path, tarball: Path) -> list[str]:
    """The README's commands that set the project up in the reader's folder,
    as a reader runs them, in order: installing the tarball, then the
    TypeScript section's command; with ``project`` for that folder and
    ``tarball`` for the one the `dist` fixture built (`make dist`, the
    README's command before them)."""
    installs = SHELL_BLOCK.findall(readme_section("## Install"))
    typescript = SHELL_BLOCK.findall(readme_section("### In a TypeScript project"))
    lines = [
        line for block in [*installs, *typescript] for line in block.splitlines() if READERS_PROJECT in line
    ]
    assert len(lines) == 2, lines  # the tarball's install, then TypeScript's
    return [
        line.replace(READERS_PROJECT, str(project)).replace(READERS_TARBALL, str(tarball)) for line in lines
    ]


def readme_build_command() -> str:
    """The command the README says compiles the project and runs it."""
    found = re.search(r"`(npx tsc[^`]*)` prints an ID", readme_section("### In a TypeScript project"))
    assert found, "the README no longer says how to compile and run the project"
    return found[1]


def npm_environment() -> dict[str, str]:
    """A reader's environment, with npm told (by its npm_config_ variables,
    not by changing the commands) to prefer its cache and skip the audit."""
    quiet = {"audit": "false", "fund": "false", "prefer_offline": "true", "loglevel": "error"}
    return clean_env() | {f"npm_config_{name}": value for name, value in quiet.items()}


@pytest.fixture(scope="module")
def typescript_project(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("typescript-project")
    files = readme_files()
    assert set(files) == {"package.json", "tsconfig.json", "src/index.ts"}, set(files)
    for name, body in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(body)
    for command in readme_commands(project, dist["tarball"]):
        run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=project, env=npm_environment())
    return project


def installed_major(project: Path, package: str) -> int:
    manifest = json.loads((project / "node_modules" / package / "package.json").read_text())
    return int(manifest["version"].split(".")[0])


def test_a_typescript_project_set_up_as_the_readme_says_compiles_and_takes_an_id(typescript_project, dev):
    """client-node/README.md said ES modules, but not that a TypeScript
    project needs "type": "module" (else TS1309 on top-level await) and
    @types/node; and its command installed the newest TypeScript, 7, which
    refused its tsconfig.json (TS5011, no rootDir) while this test compiled
    with the 5.9 it installed itself. The README's own commands, as written,
    make a project that compiles with what they install, and runs."""
    out = run(
        ["bash", "-e", "-o", "pipefail", "-c", readme_build_command()],
        cwd=typescript_project,
        env=clean_env() | {"IDBLOCKS_URL": dev.url},
    )
    first, unused = out.strip().splitlines()
    assert int(first) >= 1
    assert unused.startswith("unused: ")
    # What compiled it is the major the README's command names.
    section = readme_section("### In a TypeScript project")
    pinned = re.search(r"npm install --save-dev typescript@(\d+) ", section)
    assert pinned, "the README's command names no major version of TypeScript"
    assert installed_major(typescript_project, "typescript") == int(pinned[1])


def test_the_readmes_files_compile_with_typescript_5_too(typescript_project, tmp_path):
    """The README says its tsconfig.json compiles with TypeScript 5 as well
    as with the major its command installs: the client's own compiler (5.9)
    reads it and compiles the project's files, emitting, with no error.
    (--skipLibCheck: @types/node's own declarations are @types/node's
    business, and checking them is most of the time TypeScript 5 takes.)"""
    compiler = NODE_DIR / "node_modules" / "typescript" / "bin" / "tsc"
    assert json.loads((compiler.parents[1] / "package.json").read_text())["version"].startswith("5.")
    errors, said = tsc(
        typescript_project, "--outDir", str(tmp_path / "out"), "--skipLibCheck", compiler=compiler
    )
    assert errors == [], said
    assert (tmp_path / "out" / "index.js").is_file()


def test_without_what_the_readme_asks_for_tsc_fails_as_it_says(typescript_project, tmp_path):
    """Each of the three needs is a need, with the error the README names:
    without "type": "module", TS1309; without Node's types, TS2688, and
    without their name in `types`, TS2591; without rootDir, TS5011 (when
    tsc writes its output)."""
    package_json = typescript_project / "package.json"
    tsconfig = typescript_project / "tsconfig.json"
    package, config = package_json.read_text(), tsconfig.read_text()
    options = json.loads(config)["compilerOptions"]

    def compiled_without(option: str, *args: str) -> list[str]:
        less = json.loads(config)
        del less["compilerOptions"][option]
        tsconfig.write_text(json.dumps(less))
        try:
            return tsc(typescript_project, *args)[0]
        finally:
            tsconfig.write_text(config)

    assert (options["rootDir"], options["types"]) == ("src", ["node"])
    try:
        package_json.write_text(json.dumps({k: v for k, v in json.loads(package).items() if k != "type"}))
        assert "TS1309" in tsc(typescript_project, "--noEmit")[0]
    finally:
        package_json.write_text(package)
    assert compiled_without("types", "--noEmit") == ["TS2591"]
    assert compiled_without("rootDir", "--outDir", str(tmp_path / "out")) == ["TS5011"]
    node_types = typescript_project / "node_modules" / "@types" / "node"
    aside = typescript_project / "node-types-aside"
    node_types.rename(aside)
    try:
        assert tsc(typescript_project, "--noEmit")[0] == ["TS2688"]
    finally:
        aside.rename(node_types)
