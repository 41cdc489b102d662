"""Skills and lessons through the API: the library listed and shown, lessons searched by meaning, bad input."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.platform.storage.records import SkillVersion
from lamarck.skills_library import store

from .conftest import error_of


def _skill(container: Container, name: str, *, used: int = 0, succeeded: int = 0, versions: int = 1) -> None:
    with container.db.session() as session:
        for number in range(versions):
            code = f'def {name}(a: int) -> int:\n    """Add {number}."""\n    return a + {number}\n'
            version = SkillVersion(
                signature="(a: int) -> int",
                docstring=f"Add {number}.",
                code=code,
                tests=f"assert {name}(1) == {1 + number}",
                code_digest=f"{name}{number}".ljust(64, "0"),
            )
            skill = store.find_skill(session, name=name)
            if skill is None:
                skill = store.create_skill(session, name=name, provenance="user", version=version)
            else:
                store.add_version(session, skill=skill, version=version)
        skill.times_used, skill.times_succeeded = used, succeeded


def test_list_and_show_skills(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    for name in ("gamma", "alpha", "beta"):
        _skill(container, name, used=4, succeeded=3)
    _skill(container, "delta", versions=2)
    seen: list[str] = []
    url = "/v1/skills?limit=3"
    while url:
        page = client.get(url, headers=keys["read"]).json()
        seen += [s["name"] for s in page["skills"]]
        url = f"/v1/skills?limit=3&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert seen == ["alpha", "beta", "delta", "gamma"]
    alpha = client.get("/v1/skills/alpha", headers=keys["read"]).json()
    assert alpha["success_rate"] == 0.75 and alpha["tests"] == "assert alpha(1) == 1"
    assert "def alpha" in alpha["code"] and alpha["provenance"] == "user"
    delta = client.get("/v1/skills/delta", headers=keys["read"]).json()
    assert delta["version"] == 2 and [v["version"] for v in delta["versions"]] == [1, 2]
    assert delta["description"] == "Add 1." and delta["success_rate"] is None


def test_search_lessons_by_meaning(client: TestClient, container: Container, keys: dict[str, dict[str, str]]) -> None:
    lessons = container.lessons
    lessons.add("Multiply before adding unless parentheses say otherwise.", environment="arithmetic", episode_id="e1")
    lessons.add("Reverse the string before taking the first characters.", environment="string_ops", episode_id="e2")
    found = client.get("/v1/lessons?q=order of operations: 2 + 3 * 4&environment=arithmetic", headers=keys["read"])
    assert found.status_code == 200, found.text
    assert [h["text"] for h in found.json()["lessons"]] == ["Multiply before adding unless parentheses say otherwise."]
    every = client.get("/v1/lessons?q=reverse a string&k=1", headers=keys["read"]).json()["lessons"]
    assert {h["environment"] for h in every} == {"arithmetic", "string_ops"}


def test_bad_skill_and_lesson_requests(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    read = keys["read"]
    assert "no skill 'nope'" in error_of(client.get("/v1/skills/nope", headers=read), 404)
    assert "cursor" in error_of(client.get("/v1/skills?cursor=!!", headers=read), 422)
    assert "cursor" in error_of(client.get("/v1/skills?cursor=WyIyMDI2LTAxLTAxIiwiYSJd", headers=read), 422)
    assert "q" in error_of(client.get("/v1/lessons", headers=read), 422)
    assert "q" in error_of(client.get("/v1/lessons?q=", headers=read), 422)
    assert "unknown environment" in error_of(client.get("/v1/lessons?q=x&environment=chem", headers=read), 422)
    assert "k" in error_of(client.get("/v1/lessons?q=x&k=0", headers=read), 422)
    assert "'read' scope" in error_of(client.get("/v1/skills", headers=keys["tasks"]), 403)
    error_of(client.get("/v1/lessons?q=x"), 401)
