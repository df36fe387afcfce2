"""The local runtime is one package the dev server, tests, bench and scripts
share: these read the project's own source to keep it that way."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from localrun.template import ROOT

# Packages around the local runtime, and which of them each may import.
ALLOWED = {
    "localrun": set(),
    "devserver": {"localrun"},
    "scripts": {"localrun"},
    "bench": {"localrun", "devserver"},
}


def project_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).exists()]


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def top(path: Path) -> str:
    return path.relative_to(ROOT).parts[0]


def test_nothing_outside_tests_imports_tests():
    """bench/client.py started its dev server with tests.support: shipping
    code then depended on the test suite."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(name for name in imported(path) if name.split(".")[0] == "tests")
        for path in project_files()
        if top(path) != "tests"
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_local_runtime_packages_import_one_way():
    """devserver's main imported scripts.openapi, which imported devserver: a
    cycle. localrun depends on none of its users; they depend on it."""
    wrong = {}
    for path in project_files():
        package = top(path)
        if package not in ALLOWED:
            continue
        used = {name.split(".")[0] for name in imported(path)} & set(ALLOWED)
        extra = used - ALLOWED[package] - {package}
        if extra:
            wrong[str(path.relative_to(ROOT))] = sorted(extra)
    assert wrong == {}


def defined_in_text(pattern: str) -> list[str]:
    """The files, once per match, whose text matches ``pattern`` (test
    modules aside: a test may spell out a case of its own)."""
    regex = re.compile(pattern)
    return sorted(
        str(path.relative_to(ROOT))
        for path in project_files()
        if not path.name.startswith("test_")
        for _ in regex.finditer(path.read_text())
    )


def test_one_lambda_context():
    """The Lambda context stub was written twice, once inside a code string
    in bench/server.py."""
    assert defined_in_text(r"def get_remaining_time_in_millis\(") == ["localrun/invoke.py"]


def test_one_environment_scrub():
    """Dropping AWS_*/POWERTOOLS_* from a copy of os.environ was written in
    five places with three different prefix lists."""
    assert defined_in_text(r"\.items\(\)\s+if not \w+\.startswith\(") == ["localrun/environment.py"]


def test_one_table_name_map():
    """The dev server, the tests and bench each named the template's tables
    in a map of their own."""
    assert defined_in_text(r"[\"']CountersTable[\"']\s*:\s*[\"']") == ["localrun/tables.py"]


def test_bench_child_code_is_real_modules():
    """bench/server.py kept the code its child interpreters run in strings,
    which neither ruff nor a reader's editor could check."""
    code_strings = []
    for path in project_files():
        if top(path) != "bench":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
                try:
                    parsed = ast.parse(node.value)
                except SyntaxError:
                    continue
                if any(isinstance(inner, ast.Import | ast.ImportFrom) for inner in ast.walk(parsed)):
                    code_strings.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert code_strings == []
