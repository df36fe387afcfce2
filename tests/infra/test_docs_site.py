"""The documentation site: every page of docs/ is in the nav and linked from
the README, which stays a landing page; the site builds in strict mode and
loads nothing from the network."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from localrun.template import ROOT

PAGES = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md"))
README = ROOT / "README.md"
# About two screens: what and why, the two commands, one curl and one client
# example, and the links.
README_MAX_LINES = 200


def nav_pages(entries) -> list[str]:
    found = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_page_is_in_the_nav_once():
    listed = nav_pages(config()["nav"])
    assert sorted(listed) == PAGES


def test_the_readme_is_a_landing_page_linking_every_page():
    """The README was 689 lines: quick start, design, API, deploy, alarms,
    client, local development and 240 lines of measurements in one page."""
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for page in PAGES:
        if page != "index.md":  # the site's own home: the README is GitHub's
            assert f"(docs/{page})" in text, page
    assert "make dev" in text
    assert "make test" in text
    assert re.search(r"^curl .*http://127\.0\.0\.1:3000/", text, re.MULTILINE)
    assert 'HttpBackend("http://127.0.0.1:3000"' in text


def test_the_site_builds_strict_and_loads_nothing_from_the_network(tmp_path):
    """mkdocs-material would fetch Google Fonts; `theme.font: false` keeps
    the build and the pages offline."""
    assert config()["theme"]["font"] is False
    assert config()["strict"] is True
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(ROOT / ".venv" / "bin")},
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    remote = set()
    for page in site.rglob("*.html"):
        html = page.read_text()
        remote |= set(re.findall(r"<(?:link|script)[^>]+(?:href|src)=\"(https?://[^\"]+)\"", html))
    assert not remote, sorted(remote)
    reference = (site / "reference" / "index.html").read_text()
    for name in ("Sequence", "HttpBackend", "NoAuth", "FailoverBackend", "RetryPolicy"):
        assert f'id="idblocks.{name}"' in reference, name
