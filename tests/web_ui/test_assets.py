"""What the UI serves: its own pages with no inline script or style and no address of another host, the vendored
files exactly as checksummed (and no address in them beyond the reviewed list), and the security headers."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from lamarck.api.routes.ui import WEB_UI
from lamarck.api.ui import CSP

from .conftest import REPO_ROOT

VENDOR = WEB_UI / "vendor"
LICENCES = VENDOR / "licenses"
NAMESPACES = {"http://www.w3.org/2000/svg"}  # names that createElementNS needs; a browser never fetches them


def _vendor_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_tool", REPO_ROOT / "tools" / "vendor" / "vendor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _served() -> list[Path]:
    return [p for p in WEB_UI.rglob("*") if p.is_file() and LICENCES not in p.parents]


def test_vendored_files_are_exactly_the_checksummed_ones() -> None:
    sums = dict(reversed(line.split(maxsplit=1)) for line in (VENDOR / "SHA256SUMS").read_text().splitlines())
    present = {p.relative_to(VENDOR).as_posix() for p in VENDOR.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert present == set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name


def test_no_served_file_references_another_host() -> None:
    tool = _vendor_tool()
    known: dict[str, set[str]] = {}
    for line in tool.KNOWN_URLS.read_text().splitlines():
        name, url = line.split("\t", 1)
        known.setdefault(name, set()).add(url)
    for path in _served():
        found = tool.urls_in(path)
        if VENDOR in path.parents:
            unreviewed = found - known.get(path.relative_to(VENDOR).as_posix(), set())
            assert not unreviewed, f"{path}: addresses not in tools/vendor/known-urls.txt: {sorted(unreviewed)}"
        else:
            assert not found - NAMESPACES, f"{path} names another host: {sorted(found - NAMESPACES)}"
        if path.suffix == ".css":
            text = path.read_text()
            assert "@import" not in text
            targets = re.findall(r"url\(\s*['\"]?([^'\")]*)", text)
            assert all(t.startswith("data:") for t in targets), f"{path} loads {targets}"


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "style" or "style" in names or any(n.startswith("on") for n in names):
            self.problems.append(f"inline style or handler on <{tag}>")
        if tag == "script" and "src" not in names:
            self.problems.append("inline <script>")

    def handle_data(self, data: str) -> None:
        if self.lasttag == "script" and data.strip():
            self.problems.append("script text")


@pytest.mark.parametrize("page", sorted(p.name for p in WEB_UI.glob("*.html")))
def test_pages_have_no_inline_script_or_style(page: str) -> None:
    markup = _Markup()
    markup.feed((WEB_UI / page).read_text())
    assert markup.problems == []


def test_every_response_carries_the_policy(client: TestClient) -> None:
    home = client.get("/", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/ui/"
    page = client.get("/ui/")
    assert page.status_code == 200 and "Evolution runs" in page.text
    assert page.headers["content-security-policy"] == CSP and CSP.startswith("default-src 'self'")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert client.get("/v1/health").headers["content-security-policy"] == CSP
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger-ui-bundle.js" in docs.text
    assert docs.headers["content-security-policy"] == f"{CSP}; img-src 'self' data:"
    assert client.get("/redoc").status_code == 404
    assert client.get("/ui/vendor/uplot/uPlot.esm.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/nope.html").status_code == 404
