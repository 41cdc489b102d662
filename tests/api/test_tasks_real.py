"""A task submitted through the API is solved by the real local model (the session's shared engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.platform.container import Container
from lamarck.platform.settings import Settings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database


@pytest.mark.slow
def test_a_task_through_the_api_is_solved_by_the_real_model(local_gateway, sqlite_db: Database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with sqlite_db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    container = Container(Settings(data_dir=tmp_path / "data"), db=sqlite_db, gateway=local_gateway)
    headers = {"Authorization": f"Bearer {create_key(sqlite_db, [Scope.TASKS, Scope.READ])[1]}"}
    body = {"prompt": "What is 2 + 3?", "environment": "arithmetic", "expected": "5", "samples": 2, "timeout": 300}
    with TestClient(create_app(container)) as client:
        response = client.post("/v1/tasks/wait", json=body, headers=headers)
        assert response.status_code == 200, response.text
        task = response.json()
        assert task["status"] == "succeeded", task
        assert client.get(f"/v1/tasks/{task['id']}", headers=headers).json() == task
    result = task["result"]
    assert result["model_version"] == "smollm2-135m" and len(result["episode_ids"]) == 2
    assert result["usage"]["completion_tokens"] > 0 and result["usage"]["prompt_tokens"] > 0
    assert result["outcome"] in ("passed", "failed") and 0.0 <= result["reward"] <= 1.0
    assert result["outcome"] == "failed" or result["answer"] is not None
    with sqlite_db.session() as session:
        episodes = [repo.get_episode(session, episode_id=e) for e in result["episode_ids"]]
        assert [e.answer for e in episodes] == result["answers"]
        assert all(e.completion_tokens > 0 for e in episodes)
