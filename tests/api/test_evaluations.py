"""Held-out evaluations through the API: asked for, run in the task pool by the same ``evaluate`` the CLI and the
gate use, read while running and once done, listed with filters and cursors; bad input changes nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lamarck.agents.evaluation import default_harness_for, heldout_tasks, release_harness
from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import Settings
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import LLMCall

from .conftest import Model, error_of

DEADLINE_SECONDS = 120.0


def _wait(client: TestClient, location: str, headers: dict[str, str], statuses: tuple[str, ...]) -> dict[str, Any]:
    """The evaluation once its status is one of ``statuses``; fails after the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        evaluation: dict[str, Any] = client.get(location, headers=headers).json()
        if evaluation["status"] in statuses or time.monotonic() > deadline:
            assert evaluation["status"] in statuses, evaluation
            return evaluation
        time.sleep(0.05)


def test_an_evaluation_runs_in_the_pool_and_is_recorded(
    client: TestClient, container: Container, model: Model, keys: dict[str, dict[str, str]]
) -> None:
    model.gate.clear()  # the scripted model holds its answers until the test has seen the evaluation running
    asked = client.post("/v1/evaluations", json={"environment": "arithmetic", "per_level": 1}, headers=keys["models"])
    assert asked.status_code == 202, asked.text
    location = asked.headers["Location"]
    env = get_environment("arithmetic")
    tasks, eval_set = heldout_tasks(env, per_level=1)
    first = asked.json()
    assert location == f"/v1/evaluations/{first['id']}"
    assert first["status"] in ("queued", "running") and first["score"] is None and first["per_task"] == {}
    assert (first["environment"], first["model_version"], first["eval_set"]) == ("arithmetic", "smollm2-135m", eval_set)
    assert first["harness_version"] == release_harness(container.db, env).version_id
    assert first["n_tasks"] == len(tasks) and first["kind"] == "heldout"
    running = _wait(client, location, keys["read"], ("running",))
    assert running["score"] is None
    model.gate.set()
    done = _wait(client, location, keys["read"], ("succeeded", "failed"))
    assert done["status"] == "succeeded", done
    expected = sorted(1.0 if env.verify(task, "42").passed else 0.0 for task in tasks)  # the scripted model says 42
    assert sorted(done["per_task"].values()) == expected
    assert done["score"] == pytest.approx(sum(expected) / len(tasks))
    assert set(done["per_level"]) == {str(t.difficulty) for t in tasks} and done["samples"] == 1
    assert done["error"] is None and done["seconds"] >= 0
    assert model.calls > 0
    listed = client.get("/v1/evaluations?environment=arithmetic&model_version=smollm2-135m", headers=keys["read"])
    assert [e["id"] for e in listed.json()["evaluations"]] == [done["id"]]
    assert "per_task" not in listed.json()["evaluations"][0]


def test_an_evaluation_runs_the_harness_and_model_it_names(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    with container.db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m-ft-1", base="smollm2-135m", status="candidate")
    body = {"environment": "string_ops", "model_version": "smollm2-135m-ft-1", "harness_version": "default"}
    asked = client.post("/v1/evaluations", json={**body, "limit": 2, "samples": 2}, headers=keys["models"])
    assert asked.status_code == 202, asked.text
    done = _wait(client, asked.headers["Location"], keys["read"], ("succeeded", "failed"))
    assert done["status"] == "succeeded", done
    assert done["harness_version"] == default_harness_for(get_environment("string_ops")).version_id
    assert (done["model_version"], done["n_tasks"], done["samples"]) == ("smollm2-135m-ft-1", 2, 2)
    assert done["eval_set"] == heldout_tasks(get_environment("string_ops"), per_level=1, limit=2)[1]


def test_evaluations_list_newest_first_with_filters_and_cursors(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    with container.db.session() as session:
        ids = [
            repo.add_evaluation(
                session,
                environment="arithmetic",
                score=0.5,
                n_tasks=2,
                model_version="m1",
                kind="heldout",
                per_task={"a": 1.0, "b": 0.0},
                decision={"samples": 1, "per_level": {"1": 0.5}, "seconds": 1.5},
            ).id,
            repo.add_evaluation(
                session,
                environment="string_ops",
                score=1.0,
                n_tasks=1,
                model_version="m2",
                kind="gate",
                per_task={"candidate": {"a": True}, "champion": {"a": False}},
                decision={"promote": True},
            ).id,
            repo.add_evaluation(
                session, environment="arithmetic", score=0.0, n_tasks=1, model_version="m2", kind="dev"
            ).id,
        ]
    read = keys["read"]
    seen: list[dict[str, Any]] = []
    url = "/v1/evaluations?limit=2"
    while url:
        page = client.get(url, headers=read).json()
        seen += page["evaluations"]
        url = f"/v1/evaluations?limit=2&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert sorted(e["id"] for e in seen) == sorted(ids) and len(seen) == 3
    assert all(e["status"] == "succeeded" for e in seen)  # written whole by the CLI and the gate
    gate = client.get("/v1/evaluations?kind=gate", headers=read).json()["evaluations"]
    assert [e["id"] for e in gate] == [ids[1]] and gate[0]["score"] == 1.0
    shown = client.get(f"/v1/evaluations/{ids[1]}", headers=read).json()
    assert shown["per_task"] == {"candidate": {"a": True}, "champion": {"a": False}}
    first = client.get(f"/v1/evaluations/{ids[0]}", headers=read).json()
    assert (first["per_level"], first["samples"], first["seconds"]) == ({"1": 0.5}, 1, 1.5)
    by_model = client.get("/v1/evaluations?model_version=m2&environment=arithmetic", headers=read).json()
    assert [e["id"] for e in by_model["evaluations"]] == [ids[2]]


def test_bad_evaluation_requests_are_one_line_and_record_nothing(
    client: TestClient, keys: dict[str, dict[str, str]]
) -> None:
    models, read = keys["models"], keys["read"]

    def refused(body: object, status: int = 422, headers: dict[str, str] = models) -> str:
        return error_of(client.post("/v1/evaluations", json=body, headers=headers), status)

    assert "known environments are arithmetic" in refused({"environment": "chemistry"})
    assert "unknown model version 'gpt-9': use one of smollm2-135m" in refused(
        {"environment": "arithmetic", "model_version": "gpt-9"}
    )
    assert "unknown harness 'h-1': use one of arithmetic's harnesses: default" in refused(
        {"environment": "arithmetic", "harness_version": "h-1"}
    )
    assert "at most 200: lower per_level or set limit" in refused({"environment": "string_ops", "per_level": 50})
    assert "per_level" in refused({"environment": "arithmetic", "per_level": 0})
    assert "per_level" in refused({"environment": "arithmetic", "per_level": 51})
    assert "samples" in refused({"environment": "arithmetic", "samples": "many"})
    assert "environment" in refused({"per_level": 1})
    assert "environment" in refused({"environment": "a b"})
    assert "seed" in refused({"environment": "arithmetic", "seed": 3})
    assert "NUL" in refused({"environment": "arithmetic", "model_version": "a\x00"})
    malformed = client.post(
        "/v1/evaluations", content=b'{"environment": ', headers={**models, "Content-Type": "application/json"}
    )
    assert "not valid JSON" in error_of(malformed, 400)
    assert "'models' scope" in refused({"environment": "arithmetic"}, 403, read)
    assert "'models' scope" in refused({"environment": "arithmetic"}, 403, keys["tasks"])
    error_of(client.post("/v1/evaluations", json={"environment": "arithmetic"}), 401)
    assert "kind" in error_of(client.get("/v1/evaluations?kind=weekly", headers=read), 422)
    assert "cursor" in error_of(client.get("/v1/evaluations?cursor=!!", headers=read), 422)
    assert "stauts" in error_of(client.get("/v1/evaluations?stauts=running", headers=read), 422)
    assert "no evaluation abc" in error_of(client.get("/v1/evaluations/abc", headers=read), 404)
    assert "'read' scope" in error_of(client.get("/v1/evaluations", headers=keys["tasks"]), 403)
    error_of(client.get("/v1/evaluations"), 401)
    error_of(client.get("/v1/evaluations/abc"), 401)
    assert client.get("/v1/evaluations", headers=read).json() == {"evaluations": [], "next_cursor": None}


def test_an_evaluation_the_last_server_left_unfinished_ends_failed(container: Container) -> None:
    with container.db.session() as session:
        evaluation_id = api_repo.create_evaluation_request(
            session,
            environment="arithmetic",
            model_version="smollm2-135m",
            harness_version="h",
            eval_set="s",
            n_tasks=1,
            request={"environment": "arithmetic"},
            requested_by="k",
        ).id
    headers = {"Authorization": f"Bearer {create_key(container.db, [Scope.READ])[1]}"}
    with TestClient(create_app(container)) as client:
        shown = client.get(f"/v1/evaluations/{evaluation_id}", headers=headers).json()
    assert shown["status"] == "failed" and "server restarted" in shown["error"] and shown["score"] is None


@pytest.mark.slow
def test_the_real_model_is_evaluated_on_a_held_out_slice(
    local_gateway: LLMGateway, sqlite_db: Database, tmp_path: Path
) -> None:
    with sqlite_db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    container = Container(Settings(data_dir=tmp_path / "data"), db=sqlite_db, gateway=local_gateway)
    headers = {"Authorization": f"Bearer {create_key(sqlite_db, [Scope.MODELS, Scope.READ])[1]}"}
    with TestClient(create_app(container)) as client:
        asked = client.post(
            "/v1/evaluations", json={"environment": "arithmetic", "per_level": 1, "limit": 3}, headers=headers
        )
        assert asked.status_code == 202, asked.text
        deadline = time.monotonic() + 600
        while (done := client.get(asked.headers["Location"], headers=headers).json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, done
            time.sleep(0.2)
    assert done["status"] == "succeeded", done
    tasks, eval_set = heldout_tasks(get_environment("arithmetic"), per_level=1, limit=3)
    assert done["eval_set"] == eval_set and done["n_tasks"] == len(tasks) == len(done["per_task"])
    assert 0.0 <= done["score"] <= 1.0 and done["model_version"] == "smollm2-135m"
    with sqlite_db.session() as session:
        calls = session.scalar(select(func.count()).select_from(LLMCall)) or 0  # model calls, through the gateway
    assert calls > 0
    container.close()


def test_the_openapi_document_names_the_new_writes_with_examples(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    operations = {
        ("post", "/v1/skills"): ("addSkill", "201"),
        ("post", "/v1/skills/{name}/deprecate"): ("deprecateSkill", "200"),
        ("post", "/v1/evaluations"): ("createEvaluation", "202"),
        ("get", "/v1/evaluations"): ("listEvaluations", "200"),
        ("get", "/v1/evaluations/{evaluation_id}"): ("getEvaluation", "200"),
    }
    for (method, path), (operation_id, success) in operations.items():
        operation = doc["paths"][path][method]
        assert operation["operationId"] == operation_id and success in operation["responses"]
        for status in ("401", "403", "422"):
            assert operation["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith(
                "ErrorResponse"
            )
    schemas = doc["components"]["schemas"]
    for name in ("SkillCreate", "DeprecateBody", "EvaluationCreate", "EvaluationPublic"):
        assert schemas[name]["examples"], name


@pytest.mark.parametrize(
    "route",
    [
        {"model": "lamarck/smollm2-135m", "api_base": "http://127.0.0.1:9/v1"},
        {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1", "version_model": "openai/{version}"},
    ],
)
def test_a_champion_no_registry_knows_is_refused_wherever_the_route_serves_versions(
    tmp_path: Path, sqlite_db: Database, route: dict[str, str]
) -> None:
    """The evaluation's default model is checked too when a server is asked for it by name, as runs and tasks do: an
    empty registry would otherwise send a version name no server has."""
    from lamarck.api.evaluating import EvaluationCreate, EvaluationInputError, check
    from lamarck.platform.settings import ModelRoute, ModelRoutes

    settings = Settings(
        data_dir=tmp_path / "data", database_url=sqlite_db.url, models=ModelRoutes(executor=ModelRoute(**route))
    )
    container = Container(settings)
    try:
        with pytest.raises(EvaluationInputError, match="unknown model version 'smollm2-135m': none is registered"):
            check(container, EvaluationCreate(environment="arithmetic"))
    finally:
        container.close()
