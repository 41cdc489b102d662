"""The API over a real database (SQLite and PostgreSQL) with a scripted executor model, and keys of each scope."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.platform.container import Container
from lamarck.platform.settings import ApiSettings, ModelRoute, ModelRoutes, Settings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider

MAX_BODY = 4096


class Model:
    """The scripted executor: answers ``answer`` at once, or, while ``gate`` is clear, only once it is set."""

    def __init__(self) -> None:
        self.answer = "42"
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    def respond(self, messages: list[dict[str, Any]], n: int) -> list[str]:
        self.calls += 1
        self.gate.wait(timeout=30)
        return [f"ANSWER: {self.answer}"] * n


@pytest.fixture
def model() -> Iterator[Model]:
    scripted = Model()
    with scripted_provider(ScriptedLLM(scripted.respond)):
        yield scripted
    scripted.gate.set()


@pytest.fixture
def container(db: Database, tmp_path: Path, model: Model) -> Iterator[Container]:
    settings = Settings(
        data_dir=tmp_path / "data",
        models=ModelRoutes(executor=ModelRoute(model="scripted/executor")),
        api=ApiSettings(max_body_bytes=MAX_BODY, task_workers=2, sse_poll_seconds=0.05),
    )
    with db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    container = Container(settings, db=db)
    yield container
    container.close()


@pytest.fixture
def launches() -> list[tuple[str, str]]:
    """The (run id, action) of every run process the app was asked to start; none is started."""
    return []


@pytest.fixture
def client(container: Container, launches: list[tuple[str, str]]) -> Iterator[TestClient]:
    def launch(run_id: str, action: str) -> int:
        launches.append((run_id, action))
        return 0

    with TestClient(create_app(container, launcher=launch)) as test_client:
        yield test_client


@pytest.fixture
def keys(container: Container) -> dict[str, dict[str, str]]:
    """Authorization headers by scope name; "all" holds every scope but admin."""
    made = {scope.value: create_key(container.db, [scope])[1] for scope in Scope}
    made["all"] = create_key(container.db, [Scope.READ, Scope.TASKS, Scope.RUNS, Scope.MODELS])[1]
    return {name: {"Authorization": f"Bearer {key}"} for name, key in made.items()}


def error_of(response: Any, status: int) -> str:
    """The one-line message of an error response in the API's one shape, after checking its status."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    message = body["error"]["message"]
    assert message and "\n" not in message
    return message


def assert_refused_with_one_line(client: Any, method: str, path: str, body: object, headers: dict[str, str]) -> None:
    """Send ``body`` (or nothing) and expect a 4xx in the API's one error shape."""
    response = (
        client.request(method.upper(), path, json=body, headers=headers)
        if body is not None
        else getattr(client, method)(path, headers=headers)
    )
    assert 400 <= response.status_code < 500, response.text
    error_of(response, response.status_code)
