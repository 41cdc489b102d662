"""Runs: cursor-paged listing with a status filter, show, stop, generations, and bad input."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lamarck.agents.summary import GenerationSummary
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo

from .conftest import error_of


def _runs(container: Container, statuses: list[str]) -> list[str]:
    ids = []
    with container.db.session() as session:
        for index, status in enumerate(statuses):
            run = repo.create_run(session, config={"environments": ["arithmetic"]}, name=f"run {index}")
            run.status = status
            run.summary = {"owner": {"pid": 1, "host": "secret-host"}}
            session.flush()
            ids.append(run.id)
    return ids


def test_list_pages_newest_first_with_a_cursor_and_filters(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    ids = _runs(container, ["finished", "pending", "finished", "stopped", "finished"])
    seen: list[str] = []
    url = "/v1/runs?limit=2"
    while url:
        page = client.get(url, headers=keys["read"]).json()
        seen += [run["id"] for run in page["runs"]]
        url = f"/v1/runs?limit=2&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    names = [run["name"] for run in client.get("/v1/runs", headers=keys["read"]).json()["runs"]]
    assert names == [f"run {i}" for i in reversed(range(5))]
    finished = client.get("/v1/runs?status=finished", headers=keys["read"]).json()["runs"]
    assert {run["id"] for run in finished} == {ids[0], ids[2], ids[4]}
    assert "secret-host" not in client.get("/v1/runs", headers=keys["read"]).text


def test_show_stop_and_generations(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    pending, finished = _runs(container, ["pending", "finished"])
    shown = client.get(f"/v1/runs/{pending}", headers=keys["read"]).json()
    assert shown["status"] == "pending" and shown["config"] == {"environments": ["arithmetic"]}
    stop = client.post(f"/v1/runs/{pending}/stop", headers=keys["runs"])
    assert stop.status_code == 200 and stop.json() == {"id": pending, "status": "stopped"}
    assert client.get(f"/v1/runs/{pending}", headers=keys["read"]).json()["status"] == "stopped"
    assert "only a pending or running run" in error_of(
        client.post(f"/v1/runs/{finished}/stop", headers=keys["runs"]), 409
    )
    with container.db.session() as session:
        run = repo.get_run(session, run_id=finished)
        summaries = {str(g): GenerationSummary(generation=g, cells=[], attempts=g * 4).model_dump() for g in (2, 1, 10)}
        run.summary = {"generations": summaries}
    generations = client.get(f"/v1/runs/{finished}/generations", headers=keys["read"]).json()["generations"]
    assert [g["generation"] for g in generations] == [1, 2, 10] and generations[2]["attempts"] == 40


def test_bad_run_queries(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert "no run 'nope'" in error_of(client.get("/v1/runs/nope", headers=keys["read"]), 404)
    error_of(client.get("/v1/runs/nope/generations", headers=keys["read"]), 404)
    error_of(client.post("/v1/runs/nope/stop", headers=keys["runs"]), 404)
    assert "status" in error_of(client.get("/v1/runs?status=sleeping", headers=keys["read"]), 422)
    assert "cursor" in error_of(client.get("/v1/runs?cursor=!!notours", headers=keys["read"]), 422)
    assert "cursor" in error_of(client.get("/v1/runs?cursor=WzEsMl0", headers=keys["read"]), 422)
    error_of(client.get("/v1/runs?limit=1000", headers=keys["read"]), 422)


def test_start_a_run_in_its_own_process_and_resume_one(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], launches: list[tuple[str, str]]
) -> None:
    body = {"name": "from the api", "config": {"environments": ["arithmetic"], "generations": 1, "batch_size": 2}}
    response = client.post("/v1/runs", json=body, headers=keys["runs"])
    assert response.status_code == 202, response.text
    run = response.json()
    assert response.headers["Location"] == f"/v1/runs/{run['id']}"
    assert run["status"] == "pending" and run["name"] == "from the api" and run["config"]["batch_size"] == 2
    assert run["config"]["model_version"] == "smollm2-135m" and run["config"]["follow_champion"] is True
    assert launches == [(run["id"], "start")]
    assert client.post(f"/v1/runs/{run['id']}/resume", headers=keys["runs"]).status_code == 202
    assert launches[-1] == (run["id"], "start")  # its process never began: it is started, not resumed
    stopped, finished = _runs(container, ["stopped", "finished"])
    assert client.post(f"/v1/runs/{stopped}/resume", headers=keys["runs"]).status_code == 202
    assert launches[-1] == (stopped, "resume")
    assert "nothing to resume" in error_of(client.post(f"/v1/runs/{finished}/resume", headers=keys["runs"]), 409)
    error_of(client.post(f"/v1/runs/{finished}/resume", headers=keys["read"]), 403)
    assert len(launches) == 3


def test_a_bad_run_config_is_422_and_starts_nothing(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], launches: list[tuple[str, str]]
) -> None:
    cases = [
        ({"config": {"environments": []}}, "environments"),
        ({"config": {"environments": ["arithmetic"], "generations": 0}}, "generations"),
        ({"config": {"environments": ["arithmetic"], "speed": "max"}}, "speed"),
        ({"config": {"environments": ["chemistry"]}}, "unknown environment 'chemistry'"),
        ({"config": {"environments": ["humaneval"]}}, "evaluation-only"),
        ({"config": {"environments": ["arithmetic"], "model_version": "gpt-9"}}, "no model version 'gpt-9'"),
        ({"config": {"environments": ["arithmetic"], "harnesses": {"arithmetic": "nope"}}}, "no harness 'nope'"),
        ({"name": "no config"}, "config"),
    ]
    for body, expected in cases:
        assert expected in error_of(client.post("/v1/runs", json=body, headers=keys["runs"]), 422), body
    assert client.get("/v1/runs", headers=keys["read"]).json()["runs"] == [] and launches == []
