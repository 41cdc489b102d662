"""The second slice in the OpenAPI document: each route has its stable operation id, documents the error shape,
and its main response models carry examples."""

from __future__ import annotations

from fastapi.testclient import TestClient

OPERATIONS = {
    ("get", "/v1/runs/{run_id}/metrics"): "getRunMetrics",
    ("get", "/v1/runs/{run_id}/capability"): "getRunCapability",
    ("get", "/v1/runs/{run_id}/episodes"): "listRunEpisodes",
    ("get", "/v1/episodes/{episode_id}"): "getEpisode",
    ("get", "/v1/episodes/compare"): "compareEpisodes",
    ("get", "/v1/models"): "listModels",
    ("get", "/v1/models/{version_id}"): "getModel",
    ("get", "/v1/models/{version_id}/lineage"): "getModelLineage",
    ("post", "/v1/models/{version_id}/promote"): "promoteModel",
    ("post", "/v1/models/rollback"): "rollbackModel",
    ("get", "/v1/harnesses"): "listHarnesses",
    ("get", "/v1/harnesses/{harness_id}"): "getHarness",
    ("get", "/v1/harnesses/{harness_id}/lineage"): "getHarnessLineage",
    ("get", "/v1/harnesses/diff"): "diffHarnesses",
    ("post", "/v1/harnesses/{harness_id}/promote"): "promoteHarness",
    ("post", "/v1/harnesses/rollback"): "rollbackHarness",
    ("get", "/v1/skills"): "listSkills",
    ("get", "/v1/skills/{name}"): "getSkill",
    ("get", "/v1/lessons"): "searchLessons",
    ("get", "/v1/environments"): "listEnvironments",
    ("get", "/v1/curriculum/profile"): "getCurriculumProfile",
}


def test_each_route_has_its_operation_id_and_error_shape(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    for (method, path), operation_id in OPERATIONS.items():
        operation = doc["paths"][path][method]
        assert operation["operationId"] == operation_id
        assert operation["responses"]["403"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    ids = [op["operationId"] for path in doc["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    schemas = doc["components"]["schemas"]
    for name in ("RunMetrics", "EpisodeDetail", "ModelDetail", "HarnessDiffPublic", "SkillDetail", "EnvironmentPublic"):
        assert schemas[name]["examples"], name
