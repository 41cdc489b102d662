"""SkillLibrary: verify-then-add, rejections that change nothing, versions, deprecation, built-ins, retrieval."""

from __future__ import annotations

import pytest

from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.storage.database import Database
from lamarck.skills_library.builtin import builtin_skills
from lamarck.skills_library.library import LibraryConfig, SkillLibrary, UnknownSkill
from lamarck.skills_library.retrieval import SKILLS_COLLECTION
from lamarck.skills_library.skill import SkillCandidate, SkillView
from lamarck.skills_library.verify import run_tests

DOUBLE = SkillCandidate(
    name="double",
    code='def double(x: int) -> int:\n    """Multiply a number by two."""\n    return 2 * x\n',
    tests="assert double(2) == 4\nassert double(-1) == -2\n",
)


def _snapshot(library: SkillLibrary) -> list[tuple[str, int, int]]:
    return [(v.name, v.version, len(v.versions)) for v in library.list(include_deprecated=True)]


def test_add_stores_and_calls_in_the_sandbox(db: Database, skill_sandbox: Sandbox) -> None:
    library = SkillLibrary(db, skill_sandbox)
    result = library.add(DOUBLE)
    assert result.status == "added" and result.version == 1
    view = library.get("double")
    assert view is not None and view.provenance == "user" and view.signature == "double(x: int) -> int"
    assert view.description == "Multiply a number by two." and view.tests == DOUBLE.tests
    assert library.call("double", "21") == "42"
    assert library.call("double", "'ab'") == "abab"


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        (DOUBLE.model_copy(update={"code": "def double(x):\n    return 2 *\n"}), "syntax error at line 2"),
        (DOUBLE.model_copy(update={"name": "triple"}), "does not define a top-level function 'triple'"),
        (
            DOUBLE.model_copy(update={"code": "def double(x):\n    return 3 * x\n"}),
            "tests failed: AssertionError at `assert double(2) == 4`",
        ),
        (DOUBLE.model_copy(update={"tests": ""}), "no tests"),
        (
            DOUBLE.model_copy(update={"code": "def double(x):\n    while True:\n        pass\n"}),
            "stopped by the sandbox",
        ),
    ],
)
def test_rejections_carry_one_line_and_change_nothing(
    library: SkillLibrary, candidate: SkillCandidate, reason: str
) -> None:
    before = _snapshot(library)
    result = library.add(candidate)
    assert result.status == "rejected" and reason in result.reason and "\n" not in result.reason
    assert _snapshot(library) == before


def test_escape_attempts_just_fail(library: SkillLibrary, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "owned.txt"
    escape = (
        "def grab(path: str) -> str:\n"
        "    import os, socket\n"
        f"    open({str(target)!r}, 'w').write('x')\n"
        "    socket.create_connection(('127.0.0.1', 5432), timeout=1)\n"
        "    return open(path).read()\n"
    )
    result = library.add(SkillCandidate(name="grab", code=escape, tests="assert grab('/etc/shadow')\n"))
    assert result.status == "rejected" and result.reason.startswith("tests failed:")
    assert not target.exists() and library.get("grab") is None


def test_versions_no_op_and_name_clash(db: Database, skill_sandbox: Sandbox) -> None:
    library = SkillLibrary(db, skill_sandbox)
    assert library.add(DOUBLE).status == "added"
    same = DOUBLE.model_copy(update={"code": "def double(x: int) -> int:\n    # comment only\n    return 2 * x\n"})
    assert library.add(same).model_dump() == {"status": "unchanged", "name": "double", "version": 1, "reason": ""}
    changed = DOUBLE.model_copy(update={"code": "def double(x: int) -> int:\n    return x + x\n"})
    assert library.add(changed).status == "new_version"
    view = library.get("double")
    assert view is not None and view.version == 2 and [v.version for v in view.versions] == [1, 2]
    assert "x + x" in view.code
    clash = changed.model_copy(
        update={"provenance": "plugin", "package": "other-pkg", "code": "def double(x):\n    return x * 2 + 0\n"}
    )
    result = library.add(clash)
    assert result.status == "rejected" and "name clash" in result.reason and "provenance user" in result.reason
    assert library.get("double").version == 2  # type: ignore[union-attr]


def test_plugin_provenance_keeps_the_package(db: Database, skill_sandbox: Sandbox) -> None:
    library = SkillLibrary(db, skill_sandbox)
    candidate = DOUBLE.model_copy(update={"provenance": "plugin", "package": "a-rather-long-distribution-name"})
    assert library.add(candidate).status == "added"
    assert library.get("double").provenance == "plugin:a-rather-long-distribution-name"  # type: ignore[union-attr]


def test_deprecation_after_min_uses(db: Database, skill_sandbox: Sandbox) -> None:
    library = SkillLibrary(db, skill_sandbox, config=LibraryConfig(min_uses=4, deprecate_below=0.5))
    library.add(DOUBLE)
    for success in (True, False, False):
        assert library.record_use("double", success).status == "active"
    view = library.record_use("double", False)
    assert view.status == "deprecated" and view.times_used == 4 and view.times_succeeded == 1
    assert library.list() == [] and [v.name for v in library.list(include_deprecated=True)] == ["double"]
    assert library.retrieve("multiply a number by two", environment=None, k=3) == []
    with pytest.raises(UnknownSkill):
        library.record_use("nope", True)


def test_a_use_reported_again_under_its_key_is_counted_once(db: Database, skill_sandbox: Sandbox) -> None:
    """A resumed assess node credits its generation's episodes again; each (episode, skill) counts once."""
    library = SkillLibrary(db, skill_sandbox)
    library.add(DOUBLE)
    for _ in range(3):
        view = library.record_use("double", True, use_key="episode-1:double")
    view = library.record_use("double", False, use_key="episode-2:double")
    assert view.times_used == 2 and view.times_succeeded == 1


def test_builtins_pass_their_tests_and_seed_idempotently(library: SkillLibrary, skill_sandbox: Sandbox) -> None:
    for builtin in builtin_skills():
        run = run_tests(skill_sandbox, builtin.candidate.code, builtin.candidate.tests)
        assert run.passed, (builtin.candidate.name, run.summary)
    first = library.ensure_builtins()
    assert {r.status for r in first} == {"added"} and len(first) >= 6
    assert {r.status for r in library.ensure_builtins()} == {"unchanged"}
    assert {v.provenance for v in library.list()} == {"builtin"}


def test_builtin_calls(library: SkillLibrary) -> None:
    library.ensure_builtins()
    assert library.call("calculate", "(12 + 7) * 3 // 4") == "14"
    assert library.call("calculate", "__import__('os').system('id')").startswith("error: CalculatorError")
    assert library.call("reverse_words", "one two three") == "three two one"
    assert library.call("dedupe_list", "[3, 1, 3]") == "[3, 1]"
    assert library.call("word_count", "a b c") == "3"
    assert library.call("run_python", "print(6 * 7)").strip() == "42"
    assert "No such file" in library.call("run_python", "print(open('/etc/shadow').read())")


def test_retrieval_by_meaning_with_real_embeddings(memory_library: SkillLibrary) -> None:
    library = memory_library
    library.ensure_builtins()
    library.add(DOUBLE)
    handles = library.retrieve("What is (17 + 4) * 3? Compute the arithmetic.", environment="arithmetic", k=2)
    assert handles[0].name == "calculate"
    assert handles[0].call("(17 + 4) * 3") == "63"
    handles = library.retrieve("Put the words of this sentence in reverse order", environment=None, k=1)
    assert [h.name for h in handles] == ["reverse_words"]
    assert handles[0].signature == "reverse_words(text: str) -> str" and "words" in handles[0].description
    for _ in range(5):
        library.record_use("double", False)
    names = [h.name for h in library.retrieve("multiply a number by two", environment=None, k=5)]
    assert "double" not in names  # deprecated: kept, not offered


def test_an_indexing_that_read_before_a_deprecation_writes_the_deprecation_too(
    sqlite_db: Database, skill_sandbox: Sandbox, skill_memory: ChromaMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API indexes in the background: an addition's indexing can read the skill, wait for the embedder while a
    deprecation commits, and write last. Its write must not leave the index saying active."""
    plain = SkillLibrary(sqlite_db, skill_sandbox)  # writes SQL only, as the API's requests do
    indexing = SkillLibrary(sqlite_db, skill_sandbox, skill_memory)
    assert plain.add(DOUBLE).status == "added"
    write = indexing._index
    written: list[str] = []

    def a_deprecation_lands_before_the_write(view: SkillView, environment: str | None) -> None:
        if not written:
            plain.deprecate("double", reason="superseded", by="test")
        written.append(view.status)
        write(view, environment)

    monkeypatch.setattr(indexing, "_index", a_deprecation_lands_before_the_write)
    indexing.index("double")
    assert written == ["active", "deprecated"]
    [stored] = skill_memory.collection(SKILLS_COLLECTION).get(["double"])
    assert stored.metadata["status"] == "deprecated"
    indexing.index("double")  # unchanged since: one write
    assert written == ["active", "deprecated", "deprecated"]
