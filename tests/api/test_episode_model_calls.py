"""An episode's model calls through the API: what the executor sent and got back, step by step (scripted model)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from .conftest import Model, error_of

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234"


def test_a_solved_task_shows_its_model_calls_with_text(
    client: TestClient, keys: dict[str, dict[str, str]], model: Model
) -> None:
    task = {"prompt": f"With key {SECRET}: what is 6 * 7?", "environment": "arithmetic", "expected": "42"}
    solved = client.post("/v1/tasks/wait", json={**task, "samples": 2}, headers=keys["tasks"])
    assert solved.status_code == 200, solved.text
    first, second = solved.json()["result"]["episode_ids"]
    calls = client.get(f"/v1/episodes/{first}/model-calls", headers=keys["read"]).json()
    assert [(c["role"], c["step"], c["ok"]) for c in calls] == [("executor", 0, True)]
    [call] = calls
    assert call["response"] == ["ANSWER: 42", "ANSWER: 42"]  # one call served both samples
    assert call["prompt"][-1]["role"] == "user" and "what is 6 * 7?" in call["prompt"][-1]["content"]
    assert SECRET not in str(call) and "[REDACTED]" in call["prompt"][-1]["content"]
    assert call["completion_tokens"] > 0 and len(call["trace_id"]) == 32
    assert client.get(f"/v1/episodes/{second}/model-calls", headers=keys["read"]).json() == []


def test_model_calls_of_an_unknown_episode_are_a_404(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert "no episode 'nope'" in error_of(client.get("/v1/episodes/nope/model-calls", headers=keys["read"]), 404)
    error_of(client.get("/v1/episodes/nope/model-calls"), 401)
