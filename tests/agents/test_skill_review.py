from __future__ import annotations

import pytest

from lamarck.agents.skill_review import review_skills
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import SandboxSettings
from lamarck.platform.storage.database import Database
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate


@pytest.fixture
def library(sqlite_db: Database) -> SkillLibrary:
    return SkillLibrary(sqlite_db, Sandbox(SandboxSettings()))


def _candidate(name: str, code: str, tests: str, episodes: list[str] | None = None) -> SkillCandidate:
    return SkillCandidate(
        name=name,
        code=code,
        tests=tests,
        provenance="induced",
        source_episode_ids=["e1"] if episodes is None else episodes,
    )


def test_good_candidate_is_approved_and_added(library: SkillLibrary) -> None:
    good = _candidate("shout", "def shout(s: str) -> str:\n    return s.upper() + '!'\n", "assert shout('hi') == 'HI!'")
    [decision] = review_skills([good], library)
    assert decision.approved and decision.version == 1 and "verified from 1 episode" in decision.reason
    assert library.get("shout") is not None
    [again] = review_skills([good], library)
    assert not again.approved and again.reason == "already in the library"


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        (_candidate("same", "def same(x):\n    return x\n", "assert same(1) == 1"), "trivial"),
        (_candidate("seven", "def seven():\n    return 7\n", "assert seven() == 7"), "trivial"),
        (
            _candidate("orphan", "def orphan(x):\n    return x * 2\n", "assert orphan(1) == 2", episodes=[]),
            "name the episodes",
        ),
        (_candidate("untested", "def untested(x):\n    return x * 2\n", ""), "no assert-based tests"),
        (_candidate("liar", "def liar(x):\n    return x * 2\n", "assert liar(2) == 5"), "tests failed"),
    ],
)
def test_bad_candidates_are_rejected_with_a_reason(
    library: SkillLibrary, candidate: SkillCandidate, reason: str
) -> None:
    [decision] = review_skills([candidate], library)
    assert not decision.approved and reason in decision.reason
    assert library.get(candidate.name) is None
