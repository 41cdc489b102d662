"""The web UI in a real browser: Debian's chromium driven by Playwright against the API app served by a real uvicorn
on a free loopback port, over a real SQLite database filled by the repository functions the loop writes with and
the typed events it publishes. One browser per session; each test gets a fresh context (its own cookies), in which
any request to a host other than the app fails the test, and so does any console error not declared expected."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from api.conftest import client, container, keys, launches, model  # noqa: F401  (the API tests' fixtures, reused)
from lamarck.api.app import create_app
from lamarck.api.session import DatabaseSessionStore
from lamarck.platform.container import Container
from lamarck.platform.storage.database import Database

CHROMIUM = Path("/usr/bin/chromium")
REPO_ROOT = Path(__file__).resolve().parents[2]
# Read at import: the suite's autouse fixture clears LAMARCK_* variables before each test.
SCREENSHOTS = REPO_ROOT / "docs" / "img" if os.environ.get("LAMARCK_UI_SCREENSHOTS") == "1" else None


@pytest.fixture
def db(sqlite_db: Database) -> Database:
    """SQLite only: the API tests cover PostgreSQL; the browser sees the same JSON either way."""
    return sqlite_db


class Clock:
    """The session store's clock, moved by hand to expire sessions."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Server:
    """uvicorn in a thread over a fresh app at each start (an app's event tailer is bound to the loop it ran on);
    the database, and so the browser's sign-in, outlive a restart."""

    base: str
    make_app: Callable[[], FastAPI]
    container: Container
    clock: Clock
    launches: list[tuple[str, str]]
    _uvicorn: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def start(self) -> None:
        config = uvicorn.Config(
            self.make_app(), host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError(f"uvicorn did not start on {self.base}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._uvicorn is not None and self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(timeout=15)
            assert not self._thread.is_alive(), "uvicorn did not stop"
            self._uvicorn = None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(container: Container, launches: list[tuple[str, str]]) -> Iterator[Server]:  # noqa: F811
    def launch(run_id: str, action: str) -> int:
        launches.append((run_id, action))
        return 0

    clock = Clock()

    def make_app() -> FastAPI:
        """A new app and a new session store over the same database at each start, as a restarted server has."""
        app = create_app(container, launcher=launch)
        app.state.sessions = DatabaseSessionStore(container.db, ttl_seconds=3600, clock=clock)
        return app

    served = Server(f"http://127.0.0.1:{free_port()}", make_app, container, clock, launches)
    served.start()
    yield served
    served.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is missing: apt-get install chromium (make setup installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


@dataclass
class Browse:
    """A browser context on the app: its page, the console errors and the foreign requests it saw."""

    server: Server
    context: Any
    page: Any
    console_errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    expected: list[re.Pattern[str]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.server.base + path

    def goto(self, path: str) -> Any:
        return self.page.goto(self.url(path))

    def expect_console(self, pattern: str) -> None:
        """A console error this test provokes on purpose (Chromium logs every 4xx answer as one)."""
        self.expected.append(re.compile(pattern))

    def sign_in(self, key: str) -> None:
        response = self.context.request.post(self.url("/ui/session"), data={"key": key}, headers=self.origin)
        assert response.status == 200, response.text()

    @property
    def origin(self) -> dict[str, str]:
        return {"Origin": self.server.base}

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.console_errors if not any(p.search(e) for p in self.expected)]


@pytest.fixture
def browse(browser: Any, server: Server) -> Iterator[Browse]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = Browse(server, context, page)

    def only_the_app(route: Any) -> None:
        if route.request.url.startswith(server.base + "/"):
            route.continue_()
        else:
            seen.foreign.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_app)
    page.on("console", lambda message: message.type == "error" and seen.console_errors.append(message.text))
    page.on("pageerror", lambda error: seen.console_errors.append(f"uncaught: {error}"))
    page.on("response", lambda r: r.status >= 400 and seen.failed.append(f"{r.status} {r.request.method} {r.url}"))
    yield seen
    context.close()
    assert not seen.foreign, f"requests to other hosts: {seen.foreign}"
    assert not seen.unexpected_errors(), f"console errors: {seen.unexpected_errors()} (failed: {seen.failed})"


def screenshot(target: Any, name: str) -> None:
    """``docs/img/<name>.png`` of a page or an element, when LAMARCK_UI_SCREENSHOTS=1 (the README shows them)."""
    if SCREENSHOTS is not None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        options = {"full_page": True} if hasattr(target, "goto") else {}
        target.screenshot(path=str(SCREENSHOTS / f"{name}.png"), **options)
