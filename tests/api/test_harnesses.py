"""Harness versions through the API: the archive, one version, lineage, a diff, promote and rollback (scope
``models``), and bad input that changes nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lamarck.agents.harness import default_harness, promoted_harness, save_harness
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo

from .conftest import error_of


def _archive(container: Container) -> tuple[str, str, str]:
    """root (promoted) -> cooler (a knob changed) -> prompted (the system prompt changed)."""
    root = default_harness("arithmetic")
    cooler = root.derive(sampling={"temperature": 0.0})
    prompted = cooler.derive(system_prompt=root.system_prompt + "\nCheck the arithmetic twice.")
    with container.db.session() as session:
        root_id = save_harness(session, root, status="promoted", rationale="root")
        cooler_id = save_harness(session, cooler, parent_id=root_id, rationale="cooler sampling")
        prompted_id = save_harness(session, prompted, parent_id=cooler_id)
    return root_id, cooler_id, prompted_id


def test_list_show_lineage_and_diff(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    root, cooler, prompted = _archive(container)
    read = keys["read"]
    seen: list[str] = []
    url = "/v1/harnesses?limit=2"
    while url:
        page = client.get(url, headers=read).json()
        seen += [h["id"] for h in page["harnesses"]]
        url = f"/v1/harnesses?limit=2&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert sorted(seen) == sorted([root, cooler, prompted])
    assert [h["id"] for h in client.get("/v1/harnesses?status=promoted", headers=read).json()["harnesses"]] == [root]
    assert client.get("/v1/harnesses?environment=string_ops", headers=read).json()["harnesses"] == []

    shown = client.get(f"/v1/harnesses/{cooler}", headers=read).json()
    assert shown["parent_id"] == root and shown["rationale"] == "cooler sampling"
    assert shown["spec"]["sampling"]["temperature"] == 0.0 and shown["rating"] == 1500.0

    lineage = client.get(f"/v1/harnesses/{prompted}/lineage", headers=read).json()
    assert [h["id"] for h in lineage["ancestors"]] == [cooler, root] and lineage["children"] == []

    knob = client.get(f"/v1/harnesses/diff?a={root}&b={cooler}", headers=read).json()
    assert "sampling.temperature" in knob["knobs"] and knob["knobs"]["sampling.temperature"]["b"] == 0.0
    assert knob["prompt"] == []
    text = client.get(f"/v1/harnesses/diff?a={cooler}&b={prompted}", headers=read).json()
    assert text["knobs"] == {} and "+Check the arithmetic twice." in text["prompt"]


def test_promote_then_rollback(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    root, cooler, _ = _archive(container)
    promoted = client.post(f"/v1/harnesses/{cooler}/promote", json={"reason": "by hand"}, headers=keys["models"])
    assert promoted.status_code == 200 and promoted.json() == {"environment": "arithmetic", "harness": cooler}
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == cooler
        assert repo.get_harness(session, harness_id=root).status == "retired"
    body = {"environment": "arithmetic"}
    rolled = client.post("/v1/harnesses/rollback", json=body, headers=keys["models"])
    assert rolled.status_code == 200 and rolled.json() == {"environment": "arithmetic", "harness": root}
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == root


def test_bad_harness_requests_change_nothing(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    root, cooler, _ = _archive(container)
    read, models = keys["read"], keys["models"]
    assert "no harness 'nope'" in error_of(client.get("/v1/harnesses/nope", headers=read), 404)
    error_of(client.get("/v1/harnesses/nope/lineage", headers=read), 404)
    assert "no harness 'nope'" in error_of(client.get(f"/v1/harnesses/diff?a={root}&b=nope", headers=read), 404)
    error_of(client.get(f"/v1/harnesses/diff?a={root}", headers=read), 422)
    assert "status" in error_of(client.get("/v1/harnesses?status=best", headers=read), 422)
    assert "cursor" in error_of(client.get("/v1/harnesses?cursor=!!", headers=read), 422)
    error_of(client.post("/v1/harnesses/nope/promote", headers=models), 404)
    assert "'models' scope" in error_of(client.post(f"/v1/harnesses/{cooler}/promote", headers=read), 403)
    rollback = "/v1/harnesses/rollback"
    assert "'models' scope" in error_of(client.post(rollback, json={"environment": "arithmetic"}, headers=read), 403)
    assert "unknown environment" in error_of(client.post(rollback, json={"environment": "chem"}, headers=models), 422)
    assert "nothing to roll back" in error_of(
        client.post(rollback, json={"environment": "arithmetic"}, headers=models), 409
    )
    assert "nothing to roll back" in error_of(
        client.post(rollback, json={"environment": "string_ops"}, headers=models), 409
    )
    error_of(client.post(rollback, json={}, headers=models), 422)
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == root
        assert repo.get_harness(session, harness_id=cooler).status == "candidate"
