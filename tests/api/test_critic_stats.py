"""``GET /v1/critic/stats``: the judge's blind verdicts against the verifier's (scope ``read``), its place in the
OpenAPI document, and bad requests refused in the one error shape."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.trajectory import Trajectory

from .conftest import error_of


def _judged(container: Container, cases: list[tuple[bool, bool]], *, blind: bool = True) -> None:
    with container.db.session() as session:
        task = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="1 + 1")
        for judge, verifier in cases:
            episode = repo.record_episode(
                session, task_id=task.id, model_version="m", harness_version="h1", trajectory=Trajectory()
            )
            repo.add_verdict(
                session,
                episode_id=episode.id,
                reward=float(verifier),
                passed=verifier,
                source="both",
                judge_passed=judge,
                critic_model="lamarck/smollm2-135m",
                details={"judge_blind": True, "verifier_passed": verifier, "agree": judge == verifier} if blind else {},
            )


def test_stats_per_critic_model_and_harness(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    empty = client.get("/v1/critic/stats", headers=keys["read"])
    assert empty.status_code == 200 and empty.json()["groups"] == [] and empty.json()["total"]["judged"] == 0
    _judged(container, [(True, True), (True, False), (False, False), (False, True), (True, True)])
    _judged(container, [(True, False)], blind=False)
    body = client.get("/v1/critic/stats", headers=keys["read"]).json()
    (group,) = body["groups"]
    assert group == {
        "critic_model": "lamarck/smollm2-135m",
        "harness_version": "h1",
        "judged": 5,
        "true_pass": 2,
        "false_pass": 1,
        "false_fail": 1,
        "true_fail": 1,
        "unblinded": 1,
        "agreement": 0.6,
        "precision": 2 / 3,
        "recall": 2 / 3,
    }
    assert body["total"] == {**group, "critic_model": None, "harness_version": None}


def test_bad_stats_requests_are_refused(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    error_of(client.get("/v1/critic/stats"), 401)
    assert "'read' scope" in error_of(client.get("/v1/critic/stats", headers=keys["tasks"]), 403)
    assert "model" in error_of(client.get("/v1/critic/stats?model=x", headers=keys["read"]), 422)


def test_stats_in_the_openapi_document(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    operation = doc["paths"]["/v1/critic/stats"]["get"]
    assert operation["operationId"] == "getCriticStats"
    assert operation["responses"]["403"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    schemas = doc["components"]["schemas"]
    assert schemas["CriticStatsPublic"]["examples"] and schemas["JudgeAgreement"]["examples"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("CriticStatsPublic")
