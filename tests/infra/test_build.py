"""What `sam build` produced (make test runs it before the suites): a layer
with the core and its arm64 dependencies, and functions holding only their
handler."""

from __future__ import annotations

import os

import pytest

from localrun.template import ROOT

BUILD = ROOT / ".aws-sam" / "build"

pytestmark = pytest.mark.skipif(
    not BUILD.exists() and not os.environ.get("IDBLOCKS_REQUIRE_BUILD"),
    reason="no .aws-sam/build: run `sam build` (make test does)",
)


def test_layer_holds_the_core_and_its_pinned_dependencies():
    python = BUILD / "CoreLayer" / "python"
    assert (python / "idblocks_core" / "logic" / "allocation.py").is_file()
    pinned = {
        line.split("==")[0].lower().replace("-", "_")
        for line in (ROOT / "layers/core/requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    installed = {p.name.split("-")[0].lower() for p in python.glob("*.dist-info")}
    assert pinned == installed


# The layer's native libraries: none since the X-Ray SDK left it (wrapt,
# which it patched botocore with, was the only one). A dependency that brings
# one goes here, after this test has shown it is built for arm64.
NATIVE: list[str] = []


def test_layer_native_code_is_built_for_arm64():
    native = sorted((BUILD / "CoreLayer").rglob("*.so*"))
    for library in native:
        assert library.read_bytes()[18] == 0xB7, library  # ELF e_machine: EM_AARCH64
    assert [str(p.relative_to(BUILD / "CoreLayer")) for p in native] == NATIVE


@pytest.mark.parametrize("function", ["NextFunction", "BatchFunction", "AdminFunction"])
def test_functions_hold_only_their_handler(function):
    files = sorted(p.name for p in (BUILD / function).iterdir())
    assert files == ["app.py"]
