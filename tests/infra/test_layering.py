"""The layer's folders import one way: api -> logic -> dal -> domain.

A request descends handler -> use case -> store; the rules, errors and
values every step speaks live in domain/, below all of them. A module may
import its own folder and the folders below it, never one above: a store
that imported a use case (or a use case the HTTP layer) would let a call
climb back up.
"""

from __future__ import annotations

import ast

import pytest

from localrun.template import ROOT

PACKAGE = ROOT / "layers" / "core" / "idblocks_core"

# Higher imports lower. core.py wires the layers together, so it sits just
# under the HTTP layer that asks it for the use cases.
RANK = {"api": 5, "core": 4, "logic": 3, "dal": 2, "settings": 1, "observability": 1, "domain": 0}


def place(module: str) -> str:
    """'idblocks_core.dal.counter_store' -> 'dal'; 'idblocks_core.core' -> 'core'."""
    return module.split(".")[1]


def imports_of(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("idblocks_core."):
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "idblocks_core":
            found.update(f"idblocks_core.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("idblocks_core."))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_place():
    for path in MODULES:
        assert path.relative_to(PACKAGE).parts[0].removesuffix(".py") in RANK, path


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_its_own_folder_and_those_below(path):
    here = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    upward = [m for m in imports_of(path) if place(m) != here and RANK[place(m)] >= RANK[here]]
    assert not upward, f"{path.relative_to(ROOT)} ({here}) imports upward: {upward}"


def aws_sdk_imports_of(path) -> set[str]:
    """The boto3 and botocore modules a file imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        found.update(name for name in names if name.split(".")[0] in ("boto3", "botocore"))
    return found


def test_only_the_dynamodb_module_imports_the_aws_sdk():
    # Given every module of the layer
    # When each is read for imports of boto3 or botocore
    importers = {str(path.relative_to(PACKAGE)) for path in MODULES if aws_sdk_imports_of(path)}
    # Then one module holds the client, its retries and its errors; the store speaks through it
    assert importers == {"dal/dynamodb.py"}
