"""Shared fixtures: real SQLite and PostgreSQL databases, Redis, the loaded model (model_fixtures)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lamarck.platform import tracing
from lamarck.platform.settings import TracingSettings
from lamarck.platform.storage import migrate
from lamarck.platform.storage.database import Database

pytest_plugins = ["model_fixtures"]

REPO_ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = os.environ.get("LAMARCK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LAMARCK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SERVICE_MARKS = ("postgres", "redis", "bubblewrap", "chromium")

_service_skips: list[str] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span finished during the test, from tracing with default settings (no exporter but this one)."""
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    tracing.configure(TracingSettings())
    tracing.add_span_processor(processor)
    try:
        yield exporter
    finally:
        tracing.remove_span_processor(processor)
        tracing.configure(TracingSettings())


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's lamarck.toml or LAMARCK_* variables by accident."""
    for key in list(os.environ):
        if (
            key.startswith("LAMARCK_")
            and not key.startswith("LAMARCK_TEST_")
            and key != "LAMARCK_FAIL_ON_SERVICE_SKIPS"
        ):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("LAMARCK_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    db = Database(f"sqlite:///{tmp_path / 'lamarck.db'}")
    migrate.upgrade(db)
    yield db
    db.dispose()


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    from lamarck.platform.storage.database import DatabaseError

    try:
        Database(POSTGRES_ADMIN_URL).check()
    except DatabaseError as exc:
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    return POSTGRES_ADMIN_URL


@pytest.fixture
def postgres_db(postgres_server_url: str) -> Iterator[Database]:
    """A fresh, migrated PostgreSQL database for one test, dropped afterwards."""
    from sqlalchemy import text

    name = f"lamarck_test_{uuid.uuid4().hex[:12]}"
    admin = Database(postgres_server_url)
    with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = postgres_server_url.rsplit("/", 1)[0] + f"/{name}"
    db = Database(url)
    migrate.upgrade(db)
    yield db
    db.dispose()
    with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest) -> Database:
    """The same test on both databases."""
    return request.getfixturevalue(f"{request.param}_db")


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {exc}")
    finally:
        client.close()
    return REDIS_URL


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "postgres_db" in fixtures or "postgres_server_url" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if "redis_url" in fixtures:
            item.add_marker(pytest.mark.redis)
        if "sandbox" in fixtures:
            item.add_marker(pytest.mark.bubblewrap)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.chromium)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and any(mark in report.keywords for mark in SERVICE_MARKS):
        _service_skips.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _service_skips and os.environ.get("LAMARCK_FAIL_ON_SERVICE_SKIPS"):
        print(
            f"\n{len(_service_skips)} tests that need PostgreSQL, Redis, bubblewrap or chromium were skipped; "
            "CI requires all:"
        )
        for nodeid in _service_skips:
            print(f"  {nodeid}")
        session.exitstatus = 1


@pytest.fixture
def local_gateway(local_engine, sqlite_db: Database):  # type: ignore[no-untyped-def]
    """The gateway with every role on the real local model (shared engine), recording calls in SQLite."""
    from lamarck.platform.llm.gateway import LLMGateway
    from lamarck.platform.llm.provider import register_local_provider
    from lamarck.platform.settings import GatewaySettings, ModelRoutes

    register_local_provider(local_engine)
    return LLMGateway(
        ModelRoutes(),
        GatewaySettings(retries=0),
        db=sqlite_db,
        ensure_local_provider=lambda: register_local_provider(local_engine),
    )
