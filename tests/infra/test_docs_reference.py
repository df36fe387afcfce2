"""The API reference (docs/reference.md, rendered by mkdocstrings) covers
every public class: the package's own (idblocks.__all__), and each class the
pages tell a reader to import from a module of it (AsyncHttpBackend from
idblocks.async_backend, MemoryBackend from idblocks.testing ...)."""

from __future__ import annotations

import importlib
import inspect
import re

import idblocks
from localrun.template import ROOT

REFERENCE = ROOT / "docs" / "reference.md"
PAGES = [ROOT / "README.md", ROOT / "client" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.MULTILINE)


def rendered() -> set[str]:
    """The classes reference.md's ::: directives render: a module's public
    names (its __all__, else the public classes it defines), or the one
    class named."""
    names = set()
    for target in DIRECTIVE.findall(REFERENCE.read_text()):
        module_name, _, attribute = target.rpartition(".")
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module_name), attribute), target
            names.add(attribute)
            continue
        defined = [
            name
            for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == target and not name.startswith("_")
        ]
        names |= set(getattr(module, "__all__", defined))
    return names


def public_classes() -> set[str]:
    """idblocks' exported classes, and the classes the pages import from its modules."""
    found = {name for name in idblocks.__all__ if inspect.isclass(getattr(idblocks, name))}
    text = "\n".join(page.read_text() for page in PAGES if page != REFERENCE)
    for _module, names in re.findall(r"from idblocks\.(\w+) import ([\w, ]+)", text):
        found |= {name.strip() for name in names.split(",")}
    for module, name in re.findall(r"\bidblocks\.(\w+)\.([A-Z]\w*)", text):
        assert inspect.isclass(getattr(importlib.import_module(f"idblocks.{module}"), name)), name
        found.add(name)
    return found


def test_the_reference_renders_every_public_class():
    """AsyncHttpBackend, MemoryBackend and AsyncMemoryBackend, which the
    client page tells readers to use, were missing from it."""
    assert {"AsyncHttpBackend", "MemoryBackend", "AsyncMemoryBackend"} <= public_classes()
    missing = public_classes() - rendered()
    assert not missing, f"docs/reference.md renders no {sorted(missing)}: add a ::: directive"
