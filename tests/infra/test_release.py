"""What a team reads before adopting idblocks holds together: one license
(Apache-2.0) in the repository and in every package's metadata, one version
in every artifact and at the top of the changelog, the Serverless Application
Repository metadata as that service accepts it, an npm package that ships
the library and nothing else, and the type checker in make lint
(docs/compatibility.md says what the version promises)."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shutil
import subprocess
import tomllib
from typing import Any

import pytest

from idblocks import exchange
from localrun.template import ROOT, default_template
from scripts import sar_template

# SHA-256 of the Apache License 2.0 as the Apache Software Foundation
# publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt, 11,358 bytes).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
LICENSES = [ROOT / "LICENSE", ROOT / "client" / "LICENSE", ROOT / "client-node" / "LICENSE"]
NODE_DIR = ROOT / "client-node"
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
RELEASE_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.MULTILINE)
DOCS = [*ROOT.glob("*.md"), *ROOT.glob("*/README.md"), *ROOT.glob("docs/*.md")]


def toml(path: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / path).read_text())


def node_package() -> dict[str, Any]:
    return json.loads((NODE_DIR / "package.json").read_text())


def node_lock() -> dict[str, Any]:
    return json.loads((NODE_DIR / "package-lock.json").read_text())


def sar_metadata() -> dict[str, Any]:
    return default_template().raw["Metadata"]["AWS::ServerlessRepo::Application"]


def changelog_releases() -> list[tuple[str, str]]:
    text = (ROOT / "CHANGELOG.md").read_text()
    return [(found["version"], found["date"]) for found in RELEASE_HEADING.finditer(text)]


# -- the license ------------------------------------------------------------------


@pytest.mark.parametrize("path", LICENSES, ids=[str(p.relative_to(ROOT)) for p in LICENSES])
def test_the_license_file_is_the_apache_2_text_unchanged(path):
    """The repository had no license. Each package keeps its own copy: an
    sdist and an npm tarball carry only what is in their directory."""
    assert not path.is_symlink(), f"{path} must be a file: npm pack leaves links out"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == APACHE_2_SHA256


def test_every_package_and_the_sar_application_declare_apache_2():
    """client-node/package.json said UNLICENSED and private."""
    client = toml("client/pyproject.toml")["project"]
    service = toml("pyproject.toml")["project"]
    node = node_package()
    assert client["license"] == service["license"] == node["license"] == "Apache-2.0"
    assert client["license-files"] == ["LICENSE"]
    assert node_lock()["packages"][""]["license"] == "Apache-2.0"
    assert "private" not in node, "the package is meant to be published"
    assert node["publishConfig"] == {"access": "public"}, "a scoped package is published restricted otherwise"
    sar = sar_metadata()
    assert sar["SpdxLicenseId"] == "Apache-2.0"
    assert sar["LicenseUrl"] == "LICENSE"


# -- one version ------------------------------------------------------------------


def agent_version(agent: str, product: str) -> str:
    named = re.fullmatch(rf"{re.escape(product)}/(?P<version>\S+)", agent)
    assert named, f"{agent!r} is not {product}/<version>"
    return named["version"]


def node_user_agent() -> str:
    source = (NODE_DIR / "src" / "exchange.ts").read_text()
    [agent] = re.findall(r'^export const USER_AGENT = "([^"]*)";$', source, re.MULTILINE)
    return agent


def versions() -> dict[str, str]:
    return {
        "client/pyproject.toml": toml("client/pyproject.toml")["project"]["version"],
        "client/idblocks/exchange.py, USER_AGENT": agent_version(exchange.USER_AGENT, "idblocks-client"),
        "pyproject.toml": toml("pyproject.toml")["project"]["version"],
        "client-node/package.json": node_package()["version"],
        "client-node/package-lock.json": node_lock()["version"],
        "client-node/package-lock.json, the root package": node_lock()["packages"][""]["version"],
        "client-node/src/exchange.ts, USER_AGENT": agent_version(node_user_agent(), "idblocks-client-node"),
        "template.yaml, SemanticVersion": str(sar_metadata()["SemanticVersion"]),
        "the template make sar publishes, SemanticVersion": str(
            sar_template.build().template["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"]
        ),
        "CHANGELOG.md, the latest release": changelog_releases()[0][0],
        "docs/openapi.json, info.version": json.loads((ROOT / "docs" / "openapi.json").read_text())["info"][
            "version"
        ],
    }


def test_every_artifact_carries_the_version_of_the_latest_changelog_entry():
    """The clients said 0.1.0 each, the service had no version and there
    was no changelog; at 1.0.0 both clients still sent User-Agent .../0.1."""
    found = versions()
    version = found["CHANGELOG.md, the latest release"]
    assert SEMVER.fullmatch(version), version
    assert {where: v for where, v in found.items() if v != version} == {}


def test_the_docs_name_the_current_version_where_they_name_one():
    """The Node README told users to install idblocks-client-0.1.0.tgz."""
    version = versions()["CHANGELOG.md, the latest release"]
    for path in DOCS:
        for named in re.findall(r"idblocks-client-(\d+\.\d+\.\d+)\.tgz", path.read_text()):
            assert named == version, f"{path.relative_to(ROOT)} names idblocks-client-{named}.tgz"
    example = ROOT / "examples" / "nested-application"
    assert f"idblocks=={version}" in (example / "orders" / "requirements.txt").read_text()


def test_the_changelog_keeps_the_keep_a_changelog_format():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/en/1.1.0/" in text
    assert "https://semver.org/spec/v2.0.0.html" in text
    assert re.search(r"^## \[Unreleased\]$", text, re.MULTILINE), "what is not released yet goes there"
    releases = changelog_releases()
    assert releases, "no release entry"
    for version, _ in releases:
        assert SEMVER.fullmatch(version), version
    numbers = [tuple(int(part) for part in version.split(".")) for version, _ in releases]
    assert numbers == sorted(set(numbers), reverse=True), "newest first, each once"
    dates = [date for _, date in releases]
    assert dates == sorted(dates, reverse=True)
    sections = set(re.findall(r"^### (.+)$", text, re.MULTILINE))
    assert sections <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, sections


# -- the Serverless Application Repository ------------------------------------------


def test_the_sar_metadata_is_what_the_repository_accepts():
    """The template had no AWS::ServerlessRepo::Application metadata. The
    limits are those botocore's model of the service documents for
    CreateApplication (botocore/data/serverlessrepo/2017-09-08); cfn-lint
    does not read this metadata."""
    sar = sar_metadata()
    for required in ("Name", "Description", "Author", "SemanticVersion", "SpdxLicenseId"):
        assert sar.get(required), f"{required} is missing"
    assert re.fullmatch(r"[a-zA-Z0-9\-]{1,140}", sar["Name"])
    assert 1 <= len(sar["Description"]) <= 256
    assert len(sar["Author"]) <= 127
    assert re.fullmatch(r"[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?", sar["Author"])
    assert 1 <= len(sar["Labels"]) <= 10
    for label in sar["Labels"]:
        assert re.fullmatch(r"[a-zA-Z0-9+\-_:/@]{1,127}", label), label
    assert SEMVER.fullmatch(str(sar["SemanticVersion"]))
    for local in ("LicenseUrl", "ReadmeUrl"):  # files of this repository, which sam package uploads
        path = ROOT / sar[local]
        assert path.is_file(), local
        assert path.stat().st_size <= 5 * 1024 * 1024, local
    for url in ("HomePageUrl", "SourceCodeUrl"):
        assert sar[url].startswith("https://"), url


def test_the_publishing_page_names_the_placeholders_to_replace():
    page = (ROOT / "docs" / "nested-application.md").read_text()
    for url in {sar_metadata()["HomePageUrl"], sar_metadata()["SourceCodeUrl"]}:
        assert url in page, f"{url} is a placeholder the page must tell the publisher to replace"


# -- what npm would publish ---------------------------------------------------------


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed (make node checks it)")
def test_npm_would_publish_the_library_its_sources_and_the_license_only():
    """With files [dist/src] alone the tarball had no license and source maps
    pointing at TypeScript it did not carry. Tests, benchmarks and examples
    stay out."""
    if not (NODE_DIR / "dist" / "src" / "index.js").exists():
        pytest.skip("the Node client is not built: make node")
    done = subprocess.run(
        ["npm", "pack", "--dry-run", "--json", "--ignore-scripts"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    packed = json.loads(done.stdout)[0]
    files = {entry["path"] for entry in packed["files"]}
    assert packed["filename"] == f"idblocks-client-{node_package()['version']}.tgz"
    assert {"package.json", "README.md", "LICENSE", "dist/src/index.js", "dist/src/index.d.ts"} <= files
    assert {path for path in files if not path.startswith(("dist/src/", "src/"))} == {
        "package.json",
        "README.md",
        "LICENSE",
    }
    for path in (p for p in files if p.endswith(".js.map")):
        for source in json.loads((NODE_DIR / path).read_text())["sources"]:
            shipped = posixpath.normpath(posixpath.join(posixpath.dirname(path), source))
            assert shipped in files, f"{path} maps to {shipped}, which the tarball does not have"


# -- the type checker -------------------------------------------------------------


def test_make_lint_type_checks_the_client_the_layer_and_the_functions_strictly():
    """Nothing checked the annotations, and the client shipped no py.typed."""
    mypy = toml("pyproject.toml")["tool"]["mypy"]
    assert mypy["strict"] is True
    # Folders, not lists of files: a module added to a package is checked too.
    assert {"client/idblocks", "layers/core/idblocks_core", "functions"} <= set(mypy["files"])
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^\tmypy$", lint, re.MULTILINE), lint
    assert (ROOT / "client" / "idblocks" / "py.typed").exists()
    assert toml("client/pyproject.toml")["tool"]["setuptools"]["package-data"]["idblocks"] == ["py.typed"]


def test_every_type_ignore_names_its_code_and_its_reason():
    """A bare ignore hides every error of its line: each names the one it
    ignores and says why, on its line or in the comment line above it."""
    checked = [ROOT / "client" / "idblocks", ROOT / "layers" / "core", ROOT / "functions"]
    for path in (source for folder in checked for source in folder.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if "type: ignore" not in line:
                continue
            where = f"{path.relative_to(ROOT)}:{number + 1}"
            named = re.search(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\](?P<rest>.*)$", line)
            assert named, f"{where}: name the error code"
            said_above = lines[number - 1].strip().startswith("#")
            assert named["rest"].strip().startswith("#") or said_above, f"{where}: say why"
