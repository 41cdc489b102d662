"""Adding and deprecating skills through the API: the tests run in the real bubblewrap sandbox before anything is
stored, a failing skill is refused with the verifier's reason, clashes are 409, and bad input changes nothing."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.skills_library.retrieval import SKILLS_COLLECTION

from .conftest import assert_refused_with_one_line, error_of

GCD = (
    'def gcd(a: int, b: int) -> int:\n    """Greatest common divisor."""\n'
    "    while b:\n        a, b = b, a % b\n    return a\n"
)
GCD_TESTS = "assert gcd(4, 6) == 2\nassert gcd(7, 0) == 7"


def _indexed_status(container: Container, name: str, *, until: str = "active") -> object:
    """The skill's status in the vector index once it is ``until``, or as it is at the deadline."""
    collection = container.memory.collection(SKILLS_COLLECTION)
    deadline = time.monotonic() + 600  # the first use loads the embedding model
    while True:
        found = collection.get([name])
        status = found[0].metadata.get("status") if found else None
        if status == until or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _body(name: str = "gcd", code: str = GCD, tests: str = GCD_TESTS) -> dict[str, str]:
    return {"name": name, "code": code, "tests": tests}


def test_a_verified_skill_is_stored_indexed_and_versioned(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    added = client.post("/v1/skills", json=_body(), headers=keys["models"])
    assert added.status_code == 201, added.text
    assert added.headers["Location"] == "/v1/skills/gcd"
    skill = added.json()
    assert (skill["name"], skill["version"], skill["provenance"], skill["status"]) == ("gcd", 1, "user", "active")
    assert skill["description"] == "Greatest common divisor." and skill["signature"].startswith("gcd(a: int, b: int)")
    assert client.get("/v1/skills/gcd", headers=keys["read"]).json() == skill
    assert _indexed_status(container, "gcd") == "active"  # indexed in the background, not by a retrieval's repair
    assert [h.name for h in container.library.retrieve("greatest common divisor of two numbers", k=1)] == ["gcd"]
    assert container.library.call("gcd", "[12, 18]") == "6"  # the stored code runs, in the sandbox

    same = client.post("/v1/skills", json=_body(code=GCD.replace("a, b = b, a % b", "a, b = (b, a % b)")))
    assert same.status_code == 401  # no key: refused before anything is judged
    assert "already has this code" in error_of(client.post("/v1/skills", json=_body(), headers=keys["models"]), 409)

    faster = GCD.replace(
        "    while b:\n        a, b = b, a % b\n    return a\n", "    import math\n    return math.gcd(a, b)\n"
    )
    second = client.post("/v1/skills", json=_body(code=faster), headers=keys["admin"])
    assert second.status_code == 201, second.text
    assert second.json()["version"] == 2 and [v["version"] for v in second.json()["versions"]] == [1, 2]


def test_a_failing_skill_is_refused_with_the_reason_and_nothing_is_stored(
    client: TestClient, keys: dict[str, dict[str, str]]
) -> None:
    wrong = _body(tests="assert gcd(4, 6) == 3")
    message = error_of(client.post("/v1/skills", json=wrong, headers=keys["models"]), 422)
    assert message.startswith("skill gcd failed verification:") and "fix the code or its tests" in message
    assert "AssertionError" in message or "assert" in message
    unsafe = _body(code="import os\nos.remove('x')\n" + GCD)
    assert "only imports, definitions and assignments" in error_of(
        client.post("/v1/skills", json=unsafe, headers=keys["models"]), 422
    )
    assert "syntax error" in error_of(
        client.post("/v1/skills", json=_body(code="def gcd(:"), headers=keys["models"]), 422
    )
    assert "does not define a top-level function 'lcm'" in error_of(
        client.post("/v1/skills", json=_body(name="lcm"), headers=keys["models"]), 422
    )
    assert "syntax error in the tests" in error_of(
        client.post("/v1/skills", json=_body(tests="assert gcd(("), headers=keys["models"]), 422
    )
    assert client.get("/v1/skills", headers=keys["read"]).json() == {"skills": [], "next_cursor": None}
    assert "no skill 'gcd'" in error_of(client.get("/v1/skills/gcd", headers=keys["read"]), 404)


def test_a_built_in_name_is_a_conflict(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    code = "def word_count(text: str) -> int:\n    return len(text.split())\n"
    body = _body(name="word_count", code=code, tests="assert word_count('a b') == 2")
    assert "built-in skill's name" in error_of(client.post("/v1/skills", json=body, headers=keys["models"]), 409)


def test_deprecating_a_skill_hides_it_and_keeps_the_reason(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    assert client.post("/v1/skills", json=_body(), headers=keys["models"]).status_code == 201
    reason = {"reason": "  superseded by math.gcd  "}
    done = client.post("/v1/skills/gcd/deprecate", json=reason, headers=keys["models"])
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "deprecated"
    assert client.get("/v1/skills", headers=keys["read"]).json()["skills"] == []
    listed = client.get("/v1/skills?include_deprecated=true", headers=keys["read"]).json()["skills"]
    assert [(s["name"], s["status"]) for s in listed] == [("gcd", "deprecated")]
    assert container.library.retrieve("greatest common divisor", k=3) == []
    assert _indexed_status(container, "gcd", until="deprecated") == "deprecated"
    events = client.get("/v1/events?types=skill.deprecated", headers=keys["read"]).json()["events"]
    assert [e["payload"] for e in events] == [
        {
            "name": "gcd",
            "version": 1,
            "reason": "superseded by math.gcd",
            "deprecated_by": events[0]["payload"]["deprecated_by"],
        }
    ]
    assert events[0]["known"] is True and events[0]["payload"]["deprecated_by"] != "settings"
    assert "already deprecated" in error_of(
        client.post("/v1/skills/gcd/deprecate", json=reason, headers=keys["models"]), 409
    )
    assert "no skill 'lcm'" in error_of(
        client.post("/v1/skills/lcm/deprecate", json=reason, headers=keys["models"]), 404
    )


def test_bad_skill_writes_are_one_line_and_change_nothing(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    models = keys["models"]
    malformed = client.post(
        "/v1/skills", content=b'{"name": "gcd",', headers={**models, "Content-Type": "application/json"}
    )
    assert "not valid JSON" in error_of(malformed, 400)
    assert "body field code" in error_of(
        client.post("/v1/skills", json={"name": "gcd", "code": 3, "tests": "x"}, headers=models), 422
    )
    assert "body field name" in error_of(
        client.post("/v1/skills", json=_body(name="not-an-identifier"), headers=models), 422
    )
    assert "body field tests" in error_of(client.post("/v1/skills", json=_body(tests=""), headers=models), 422)
    assert "provenance" in error_of(
        client.post("/v1/skills", json={**_body(), "provenance": "builtin"}, headers=models), 422
    )
    assert "NUL" in error_of(client.post("/v1/skills", json=_body(tests="assert 1\x00"), headers=models), 422)
    assert "'models' scope" in error_of(client.post("/v1/skills", json=_body(), headers=keys["read"]), 403)
    assert "'models' scope" in error_of(client.post("/v1/skills", json=_body(), headers=keys["tasks"]), 403)
    error_of(client.post("/v1/skills", json=_body()), 401)
    assert "reason" in error_of(client.post("/v1/skills/gcd/deprecate", json={"reason": "   "}, headers=models), 422)
    assert "reason" in error_of(client.post("/v1/skills/gcd/deprecate", json={}, headers=models), 422)
    assert "'models' scope" in error_of(
        client.post("/v1/skills/gcd/deprecate", json={"reason": "x"}, headers=keys["read"]), 403
    )
    error_of(client.post("/v1/skills/gcd/deprecate", json={"reason": "x"}), 401)
    assert_refused_with_one_line(client, "post", "/v1/skills/a b/deprecate", {"reason": "x"}, models)
    assert client.get("/v1/skills?include_deprecated=true", headers=keys["read"]).json()["skills"] == []
    assert client.get("/v1/events?types=skill.deprecated", headers=keys["read"]).json()["events"] == []
