"""Model versions through the API: list, show with the gate's decision, lineage, promote and rollback (scope
``models``), and bad input that changes nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo

from .conftest import error_of

BASE = "smollm2-135m"  # promoted by the container fixture
CANDIDATE = "smollm2-135m-ft-3f2a9c1e0b7d"
GRANDCHILD = "smollm2-135m-ft-aa11bb22cc33"


def _lineage(container: Container) -> None:
    """BASE -> CANDIDATE -> GRANDCHILD, the candidate gated with per-environment results."""
    with container.db.session() as session:
        repo.register_model_version(session, version_id=CANDIDATE, base=BASE, parent_id=BASE, dataset_digest="3f2a")
        repo.register_model_version(session, version_id=GRANDCHILD, base=BASE, parent_id=CANDIDATE)
        version = repo.get_model_version(session, version_id=CANDIDATE)
        version.eval_scores = {"gate": {"arithmetic": {"candidate": 9, "champion": 5, "n": 10}}, "gate_p_value": 0.03}
        decision = {
            "candidate": CANDIDATE,
            "champion": BASE,
            "promote": True,
            "reason": "5 wins, 1 loss",
            "p_value": 0.03,
            "alpha": 0.05,
            "tolerance": 0.02,
            "look": 1,
            "environments": [
                {
                    "environment": "arithmetic",
                    "trained": True,
                    "n": 10,
                    "candidate_passes": 9,
                    "champion_passes": 5,
                    "wins": 5,
                    "losses": 1,
                    "delta": 0.4,
                    "ok": True,
                }
            ],
        }
        repo.add_evaluation(
            session, kind="gate", model_version=CANDIDATE, environment="arithmetic", score=0.9, n_tasks=10,
            decision=decision,
        )  # fmt: skip


def test_list_show_and_lineage(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    _lineage(container)
    seen: list[str] = []
    url = "/v1/models?limit=2"
    while url:
        page = client.get(url, headers=keys["read"]).json()
        seen += [m["id"] for m in page["models"]]
        url = f"/v1/models?limit=2&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert sorted(seen) == sorted([BASE, CANDIDATE, GRANDCHILD])
    promoted = client.get("/v1/models?status=promoted", headers=keys["read"]).json()["models"]
    assert [m["id"] for m in promoted] == [BASE]

    shown = client.get(f"/v1/models/{CANDIDATE}", headers=keys["read"]).json()
    gate = shown["gate"]
    assert (gate["wins"], gate["losses"], gate["p_value"], gate["champion"]) == (5, 1, 0.03, BASE)
    assert gate["environments"][0]["environment"] == "arithmetic" and shown["parent_id"] == BASE
    assert client.get(f"/v1/models/{BASE}", headers=keys["read"]).json()["gate"] is None

    lineage = client.get(f"/v1/models/{GRANDCHILD}/lineage", headers=keys["read"]).json()
    assert [m["id"] for m in lineage["ancestors"]] == [CANDIDATE, BASE] and lineage["children"] == []
    middle = client.get(f"/v1/models/{CANDIDATE}/lineage", headers=keys["read"]).json()
    assert [m["id"] for m in middle["children"]] == [GRANDCHILD]


def test_promote_then_rollback(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    _lineage(container)
    promoted = client.post(f"/v1/models/{CANDIDATE}/promote", json={"reason": "by hand"}, headers=keys["models"])
    assert promoted.status_code == 200, promoted.text
    assert promoted.json() == {"champion": CANDIDATE, "previous": BASE}
    shown = client.get(f"/v1/models/{CANDIDATE}", headers=keys["read"]).json()
    assert shown["status"] == "promoted" and shown["reason"] == "by hand" and shown["previous"] == BASE
    assert client.get(f"/v1/models/{BASE}", headers=keys["read"]).json()["status"] == "retired"

    rolled = client.post("/v1/models/rollback", headers=keys["models"])
    assert rolled.status_code == 200 and rolled.json() == {"champion": BASE, "previous": CANDIDATE}
    assert client.get(f"/v1/models/{CANDIDATE}", headers=keys["read"]).json()["status"] == "candidate"
    assert "no previous champion" in error_of(client.post("/v1/models/rollback", headers=keys["models"]), 409)
    assert client.post(f"/v1/models/{GRANDCHILD}/promote", headers=keys["models"]).json()["champion"] == GRANDCHILD


def test_bad_model_requests_change_nothing(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    _lineage(container)
    read, models = keys["read"], keys["models"]
    assert "no model version 'gpt-9'" in error_of(client.get("/v1/models/gpt-9", headers=read), 404)
    error_of(client.get("/v1/models/gpt-9/lineage", headers=read), 404)
    error_of(client.post("/v1/models/gpt-9/promote", headers=models), 404)
    assert "status" in error_of(client.get("/v1/models?status=best", headers=read), 422)
    assert "cursor" in error_of(client.get("/v1/models?cursor=WzEsMl0", headers=read), 422)
    assert "reason" in error_of(
        client.post(f"/v1/models/{CANDIDATE}/promote", json={"reason": ""}, headers=models), 422
    )
    error_of(client.post(f"/v1/models/{CANDIDATE}/promote", json={"why": "x"}, headers=models), 422)
    assert "'models' scope" in error_of(client.post(f"/v1/models/{CANDIDATE}/promote", headers=read), 403)
    assert "'models' scope" in error_of(client.post("/v1/models/rollback", headers=keys["runs"]), 403)
    error_of(client.post("/v1/models/rollback"), 401)
    with container.db.session() as session:
        assert repo.promoted_model_version(session).id == BASE  # type: ignore[union-attr]
    assert client.post(f"/v1/models/{CANDIDATE}/promote", headers=keys["admin"]).status_code == 200


def test_rollback_with_nothing_to_restore_is_409(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    message = error_of(client.post("/v1/models/rollback", headers=keys["models"]), 409)
    assert "no previous champion" in message


def test_a_refused_look_and_odd_stored_decisions_show_what_is_recorded(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    with container.db.session() as session:
        refused = repo.register_model_version(session, version_id="refused", base=BASE, parent_id=BASE)
        refused.eval_scores = {"gate": {}, "gate_p_value": None, "gate_look": 4}
        repo.register_model_version(session, version_id="odd", base=BASE, parent_id=BASE)
        odd = {"champion": 7, "promote": "yes", "p_value": "low", "environments": [{"environment": "arithmetic"}, 3]}
        repo.add_evaluation(
            session, kind="gate", model_version="odd", environment="a", score=0, n_tasks=0, decision=odd
        )
    gate = client.get("/v1/models/refused", headers=keys["read"]).json()["gate"]
    assert gate["look"] == 4 and gate["p_value"] is None and gate["environments"] == [] and gate["wins"] == 0
    odd_gate = client.get("/v1/models/odd", headers=keys["read"]).json()["gate"]
    assert odd_gate["champion"] is None and odd_gate["promote"] is None and odd_gate["environments"] == []
