"""Skill retrieval in batches: a generation's prompts embedded in one call, the same skills as one by one."""

from __future__ import annotations

from lamarck.memory.base import RetrievalQuery
from lamarck.memory.chroma import ChromaMemory
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate, SkillHandle

HALVE = SkillCandidate(
    name="halve",
    code='def halve(x: float) -> float:\n    """Divide a number by two."""\n    return x / 2\n',
    tests="assert halve(4) == 2\n",
    environment="arithmetic",
)
QUERIES = [
    RetrievalQuery("What is (17 + 4) * 3? Compute the arithmetic.", "arithmetic", 2),
    RetrievalQuery("Put the words of this sentence in reverse order", "string_ops", 1),
    RetrievalQuery("What is half of 90?", "arithmetic", 3),
    RetrievalQuery("What is half of 90?", None, 3),  # the same prompt, no environment bonus
    RetrievalQuery("Run this Python snippet and report what it prints.", "python_functions", 2),
    RetrievalQuery("Upper-case every word.", "string_ops", 0),  # a harness that shows no skills
]


def _shown(found: list[list[SkillHandle]]) -> list[list[tuple[str, str, str]]]:
    return [[(h.name, h.signature, h.description) for h in handles] for handles in found]


def test_batch_retrieval_matches_one_by_one_in_one_embedding_call(
    memory_library: SkillLibrary, skill_memory: ChromaMemory
) -> None:
    library = memory_library
    library.ensure_builtins()
    assert library.add(HALVE).status == "added"
    library.retrieve("warm up: the index is checked once", k=1)
    stats = skill_memory.embedding.stats
    before = stats.snapshot()
    batch = library.retrieve_many(QUERIES)
    cost = stats.snapshot() - before
    assert (cost.calls, cost.texts) == (1, 4)  # four distinct prompts with k > 0, embedded together
    skill_memory.embedding.cache.clear()
    before = stats.snapshot()
    one_by_one = [library.retrieve(q.text, environment=q.environment, k=q.k) for q in QUERIES]
    assert (stats.snapshot() - before).calls == 4
    assert _shown(batch) == _shown(one_by_one)
    assert [len(handles) for handles in batch] == [2, 1, 3, 3, 2, 0]
    assert batch[0][0].name == "calculate" and batch[1][0].name == "reverse_words" and batch[2][0].name == "halve"
    assert batch[2][0].call("90") == "45.0"


def test_batch_retrieval_without_memory_matches_one_by_one(library: SkillLibrary) -> None:
    library.ensure_builtins()
    batch = library.retrieve_many(QUERIES)
    assert _shown(batch) == _shown([library.retrieve(q.text, environment=q.environment, k=q.k) for q in QUERIES])
    assert batch[1][0].name == "reverse_words" and batch[-1] == []
