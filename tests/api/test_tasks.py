"""Tasks through the API with the scripted executor: submit, wait, read, cancel, idempotency, and bad input."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import ApiTask, Episode

from .conftest import Model, error_of

ARITHMETIC = {"prompt": "What is 6 * 7?", "environment": "arithmetic", "expected": "42"}


def _count(container: Container, record: type) -> int:
    with container.db.session() as session:
        return session.scalar(select(func.count()).select_from(record)) or 0


def _until_ended(client: TestClient, location: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        task = client.get(location, headers=headers).json()
        if task["status"] in ("succeeded", "failed", "cancelled"):
            return task
        time.sleep(0.05)
    raise AssertionError(f"task at {location} did not end")


def test_submit_then_read_the_verified_answer(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], model: Model
) -> None:
    response = client.post("/v1/tasks", json=ARITHMETIC, headers=keys["tasks"])
    assert response.status_code == 202, response.text
    location = response.headers["Location"]
    assert location == f"/v1/tasks/{response.json()['id']}"
    assert response.json()["status"] in ("queued", "running", "succeeded")
    task = _until_ended(client, location, keys["read"])
    assert task["status"] == "succeeded", task
    result = task["result"]
    assert result["answer"] == "42" and result["outcome"] == "passed" and result["reward"] == 1.0
    assert result["model_version"] == "smollm2-135m" and result["harness_version"].startswith("arithmetic-")
    assert result["usage"]["total_tokens"] == result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"]
    assert result["usage"]["completion_tokens"] > 0
    with container.db.session() as session:
        for episode_id in result["episode_ids"]:
            episode = repo.get_episode(session, episode_id=episode_id)
            assert episode.answer == "42" and episode.outcome == "pending"  # not training data by default
            assert repo.get_task(session, task_id=episode.task_id).source == "api"


def test_a_wrong_answer_fails_and_an_unverified_task_is_answered(
    client: TestClient, keys: dict[str, dict[str, str]], model: Model
) -> None:
    model.answer = "41"
    failed = client.post("/v1/tasks/wait", json=ARITHMETIC, headers=keys["tasks"])
    assert failed.status_code == 200, failed.text
    assert failed.json()["result"]["outcome"] == "failed" and failed.json()["result"]["reward"] == 0.0
    assert "expected 42" in failed.json()["result"]["details"]
    model.answer = "Paris"
    open_task = client.post("/v1/tasks/wait", json={"prompt": "Capital of France?", "samples": 3}, headers=keys["all"])
    result = open_task.json()["result"]
    assert result["outcome"] == "answered" and result["answer"] == "Paris" and result["reward"] is None
    assert result["environment"] == "open" and len(result["episode_ids"]) == 3 and result["answers"] == ["Paris"] * 3


def test_wait_returns_202_with_location_past_its_timeout(
    client: TestClient, keys: dict[str, dict[str, str]], model: Model
) -> None:
    model.gate.clear()
    slow = client.post("/v1/tasks/wait?timeout=0.2", json=ARITHMETIC, headers=keys["tasks"])
    assert slow.status_code == 202, slow.text
    assert slow.json()["status"] in ("queued", "running")
    model.gate.set()
    assert _until_ended(client, slow.headers["Location"], keys["read"])["status"] == "succeeded"
    body_timeout = client.post("/v1/tasks/wait", json={**ARITHMETIC, "timeout": 20}, headers=keys["tasks"])
    assert body_timeout.status_code == 200 and body_timeout.json()["status"] == "succeeded"


def test_idempotency_key_returns_the_same_task_and_refuses_another_body(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], model: Model
) -> None:
    headers = {**keys["tasks"], "Idempotency-Key": "order-17"}
    first = client.post("/v1/tasks", json=ARITHMETIC, headers=headers)
    again = client.post("/v1/tasks", json=ARITHMETIC, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    message = error_of(client.post("/v1/tasks", json={**ARITHMETIC, "samples": 2}, headers=headers), 422)
    assert "order-17" in message and "different body" in message
    assert _count(container, ApiTask) == 1
    _until_ended(client, first.headers["Location"], keys["read"])
    assert model.calls == 1  # the retry did not run the task again


def test_cancel_a_queued_task_and_refuse_cancelling_an_ended_one(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], model: Model
) -> None:
    model.gate.clear()
    running = [client.post("/v1/tasks", json=ARITHMETIC, headers=keys["tasks"]).json()["id"] for _ in range(3)]
    cancelled = client.post(f"/v1/tasks/{running[2]}/cancel", headers=keys["tasks"])
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    model.gate.set()
    for task_id in running[:2]:
        assert _until_ended(client, f"/v1/tasks/{task_id}", keys["read"])["status"] == "succeeded"
    final = client.get(f"/v1/tasks/{running[2]}", headers=keys["read"]).json()
    assert final["status"] == "cancelled" and final["result"] is None
    assert "already ended (succeeded)" in error_of(
        client.post(f"/v1/tasks/{running[0]}/cancel", headers=keys["tasks"]), 409
    )
    assert _count(container, Episode) == 2


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        ({}, 422, "body field prompt: Field required"),
        ({"prompt": "   "}, 422, "prompt is blank"),
        ({"prompt": 5}, 422, "prompt: Input should be a valid string"),
        ({"prompt": "x", "samples": 0}, 422, "samples"),
        ({"prompt": "x", "samples": "many"}, 422, "samples"),
        ({"prompt": "x", "colour": "red"}, 422, "colour"),
        ({"prompt": "x", "expected": "4"}, 422, "needs an environment"),
        ({"prompt": "x", "environment": "chemistry"}, 422, "unknown environment 'chemistry'"),
        ({"prompt": "x", "environment": "arithmetic", "expected": "forty"}, 422, "not one the arithmetic verifier"),
        ({"prompt": "x", "model_version": "gpt-9"}, 422, "no model version 'gpt-9'"),
        ({"prompt": "x", "harness_version": "nope"}, 422, "no harness 'nope'"),
        (["prompt"], 422, "body"),
    ],
)
def test_bad_input_is_a_one_line_4xx_and_changes_nothing(
    client: TestClient,
    container: Container,
    keys: dict[str, dict[str, str]],
    body: object,
    status: int,
    expected: str,
) -> None:
    message = error_of(client.post("/v1/tasks", json=body, headers=keys["tasks"]), status)
    assert expected in message, message
    assert _count(container, ApiTask) == 0


def test_malformed_json_and_unknown_ids(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    malformed = client.post(
        "/v1/tasks", content=b'{"prompt": "x",', headers={**keys["tasks"], "Content-Type": "application/json"}
    )
    assert "not valid JSON" in error_of(malformed, 400)
    assert "no task 'nope'" in error_of(client.get("/v1/tasks/nope", headers=keys["read"]), 404)
    error_of(client.post("/v1/tasks/nope/cancel", headers=keys["tasks"]), 404)
    error_of(client.post("/v1/tasks/wait?timeout=-1", json=ARITHMETIC, headers=keys["tasks"]), 422)
    assert _count(container, ApiTask) == 0


def test_a_finished_task_reads_back_from_a_new_server_and_an_unfinished_one_ends_failed(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], model: Model
) -> None:
    from lamarck.api.app import create_app

    done = client.post("/v1/tasks/wait", json=ARITHMETIC, headers=keys["tasks"]).json()
    with container.db.session() as session:
        orphan, _ = api_repo.create_api_task(session, request={"prompt": "lost"}, request_digest="d")
    with TestClient(create_app(container)) as restarted:
        assert restarted.get(f"/v1/tasks/{done['id']}", headers=keys["read"]).json() == done
        lost = restarted.get(f"/v1/tasks/{orphan.id}", headers=keys["read"]).json()
        assert lost["status"] == "failed" and "server restarted" in lost["error"]


def test_a_task_the_broker_cannot_take_is_a_503_and_fails_its_row(
    container: Container, keys: dict[str, dict[str, str]]
) -> None:
    from lamarck.api.app import create_app
    from lamarck.api.task_runner import QueuedTaskRunner

    def unreachable(task_id: str) -> None:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    runner = QueuedTaskRunner(container, workers=1, send=unreachable)
    with TestClient(create_app(container, runner=runner)) as client:
        message = error_of(client.post("/v1/tasks", json={"prompt": "What is 6 * 7?"}, headers=keys["tasks"]), 503)
        assert "could not be queued" in message and "Connection refused" in message
    with container.db.session() as session:
        (task,) = session.scalars(select(ApiTask)).all()
        assert task.status == "failed" and "could not be queued" in (task.error or "")
