"""One conformance suite for VectorMemory: every test runs in embedded mode and against a real Chroma server."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

from lamarck.memory.base import (
    CREATED_AT,
    LAST_USED,
    UTILITY,
    MemoryCollection,
    MemoryRecord,
    MemoryStoreError,
    VectorMemory,
)
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.embeddings import EMBEDDING_NAME, MiniLMEmbedding
from lamarck.platform.settings import MemorySettings

LESSONS = [
    (
        "arith-carry",
        "When adding multi-digit numbers, carry the one into the next column before summing it.",
        "arithmetic",
        2,
        "passed",
    ),
    (
        "arith-precedence",
        "Apply multiplication and division before addition and subtraction (operator precedence).",
        "arithmetic",
        3,
        "failed",
    ),
    (
        "py-off-by-one",
        "range(n) stops at n-1: check loop bounds for off-by-one errors at the end of a list.",
        "python",
        2,
        "failed",
    ),
    (
        "py-mutable-default",
        "Never use a mutable list or dict as a default argument of a Python function; use None.",
        "python",
        4,
        "passed",
    ),
    (
        "sql-injection",
        "Build SQL queries with bound parameters, never by formatting user input into the string.",
        "sql",
        3,
        "passed",
    ),
    (
        "regex-escape",
        "Escape dots and other special characters in regular expressions with a backslash.",
        "python",
        3,
        "failed",
    ),
    (
        "file-close",
        "Open files in a with-statement so they are closed even when an exception is raised.",
        "python",
        1,
        "passed",
    ),
    (
        "unit-convert",
        "Convert all quantities to the same unit (meters, seconds) before comparing or adding them.",
        "arithmetic",
        4,
        "failed",
    ),
    (
        "timezone-utc",
        "Store timestamps in UTC and convert to the user's local time zone only for display.",
        "general",
        3,
        "passed",
    ),
    (
        "float-tolerance",
        "Compare floating-point results with a tolerance such as math.isclose, not exact equality.",
        "arithmetic",
        5,
        "passed",
    ),
    (
        "recursion-base",
        "Every recursive function needs a base case, otherwise it recurses until the stack overflows.",
        "python",
        4,
        "failed",
    ),
    (
        "tool-error",
        "Read the tool's error message carefully and fix the arguments before retrying the call.",
        "general",
        1,
        "passed",
    ),
]

QUERIES = {
    "RecursionError: maximum recursion depth exceeded in my function": "recursion-base",
    "0.1 + 0.2 == 0.3 evaluated to False": "float-tolerance",
    "the user's input ended up inside my SQL string": "sql-injection",
    "the default list argument keeps growing between calls": "py-mutable-default",
    "adding kilometers to miles gave a nonsense total": "unit-convert",
    "the meeting shows the wrong hour for users in another country": "timezone-utc",
    "how do I match a literal period in a regex pattern": "regex-escape",
}


def corpus() -> list[MemoryRecord]:
    return [
        MemoryRecord(id=i, text=t, metadata={"environment": e, "difficulty": d, "outcome": o, "kind": "lesson"})
        for i, t, e, d, o in LESSONS
    ]


def rec(rid: str, text: str = "", **metadata: str | int | float | bool) -> MemoryRecord:
    return MemoryRecord(id=rid, text=text or f"record {rid}", metadata=metadata)


def test_implements_the_protocols(memory: ChromaMemory) -> None:
    assert isinstance(memory, VectorMemory)
    assert isinstance(memory.lessons, MemoryCollection)
    assert memory.collection("skills") is memory.collection("skills")
    assert memory.episodes.count() == 0


def test_add_get_delete(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus()[:3])
    assert lessons.count() == 3
    got = lessons.get(["py-off-by-one", "missing", "arith-carry"])
    assert [r.id for r in got] == ["py-off-by-one", "arith-carry"]
    assert got[1].text == LESSONS[0][1]
    assert got[1].metadata["environment"] == "arithmetic" and got[1].metadata["difficulty"] == 2
    assert isinstance(got[1].metadata[CREATED_AT], float) and got[1].metadata[LAST_USED] == got[1].metadata[CREATED_AT]
    with pytest.raises(MemoryStoreError, match="already present.*arith-carry.*upsert"):
        lessons.add([rec("arith-carry"), rec("new")])
    assert lessons.count() == 3 and lessons.get(["new"]) == []
    lessons.delete(["arith-carry", "missing"])
    assert lessons.count() == 2 and lessons.get(["arith-carry"]) == []
    assert memory.episodes.count() == 0  # collections are separate


def test_upsert_replaces_and_inserts(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add([rec("a", "carry digits when adding", environment="arithmetic")])
    lessons.upsert([rec("a", "escape regex dots", environment="python"), rec("b", "base case for recursion")])
    assert lessons.count() == 2
    (a,) = lessons.get(["a"])
    assert a.text == "escape regex dots" and a.metadata["environment"] == "python"
    assert lessons.query("regular expression special characters", k=1)[0].record.id == "a"


def test_update_metadata_merges_and_touch(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add([rec("a", outcome="failed", difficulty=2), rec("b", outcome="failed")])
    lessons.update_metadata(["a", "missing"], {"outcome": "passed", UTILITY: 2.5, "merged": True})
    (a,) = lessons.get(["a"])
    assert a.metadata["outcome"] == "passed" and a.metadata["difficulty"] == 2
    assert a.metadata[UTILITY] == 2.5 and a.metadata["merged"] is True
    assert lessons.get(["b"])[0].metadata["outcome"] == "failed"
    before = a.metadata[LAST_USED]
    time.sleep(0.01)
    lessons.touch(["a"])
    assert lessons.get(["a"])[0].metadata[LAST_USED] > before
    assert lessons.count() == 2


def test_metadata_filters(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus())

    def ids(**where: object) -> set[str]:
        return {hit.record.id for hit in lessons.query("a lesson", k=12, where=where)}  # type: ignore[arg-type]

    assert ids(environment="arithmetic", outcome="passed") == {"arith-carry", "float-tolerance"}
    assert ids(environment="python", difficulty={"$gte": 3, "$lte": 4}) == {
        "py-mutable-default",
        "regex-escape",
        "recursion-base",
    }
    assert ids(difficulty={"$gt": 4}) == {"float-tolerance"}
    assert ids(environment=["sql", "general"], outcome="passed") == {"sql-injection", "timezone-utc", "tool-error"}
    assert ids(environment={"$nin": ["python", "arithmetic"]}, difficulty={"$lt": 2}) == {"tool-error"}
    assert ids(environment="nowhere") == set()
    with pytest.raises(MemoryStoreError, match="unknown operator"):
        lessons.query("x", where={"difficulty": {"$between": [1, 2]}})


def test_retrieval_ranks_the_right_lesson_first(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus())
    texts = list(QUERIES)
    results = lessons.query(texts, k=3)
    assert len(results) == len(texts)
    for text, hits in zip(texts, results, strict=True):
        assert hits[0].record.id == QUERIES[text], f"{text!r} -> {[h.record.id for h in hits]}"
        assert [h.distance for h in hits] == sorted(h.distance for h in hits)
    filtered = lessons.query("0.1 + 0.2 == 0.3 evaluated to False", k=2, where={"environment": "python"})
    assert all(h.record.metadata["environment"] == "python" for h in filtered)


def test_nearest_gives_distances_for_dedup(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus())
    threshold = MemorySettings().dedup_threshold
    near = lessons.nearest("Every recursive function needs a base case or it recurses until the stack overflows.", k=2)
    assert near[0].record.id == "recursion-base" and near[0].distance < threshold
    assert near[1].distance > threshold
    assert 0.0 <= near[0].distance <= 2.0 and near[0].score == pytest.approx(1.0 - near[0].distance)


def test_bound_evicts_lowest_utility_then_least_recently_used(memory: ChromaMemory) -> None:
    skills = memory.collection("skills")  # max_entries=5, headroom 0 in this suite
    assert skills.max_entries == 5
    skills.add([rec("keep-useful", utility=5.0), rec("low", utility=-1.0)])
    for rid in ("old", "mid", "new"):
        skills.add([rec(rid)])
        time.sleep(0.01)
    skills.touch(["old"])  # used recently: now newer than "mid" and "new"
    assert [r.id for r in skills.eviction_candidates(3)] == ["low", "mid", "new"]
    assert [r.id for r in skills.lowest(UTILITY, 2)] == ["mid", "new"]  # records without the field come first
    skills.add([rec("x1"), rec("x2")])  # 7 > 5: evicts the two first candidates
    assert skills.count() == 5
    assert {r.id for r in skills.get(["low", "mid"])} == set()
    skills.upsert([rec("x3")])
    assert skills.count() == 5 and skills.get(["new"]) == []
    assert skills.enforce_bound() == []


def test_headroom_evicts_below_the_bound(tmp_path: Path) -> None:
    settings = MemorySettings(max_entries=10, evict_headroom=0.2)
    with ChromaMemory.embedded(tmp_path / "chroma", settings) as memory:
        skills = memory.collection("skills")
        skills.add([rec(f"s{i}", utility=float(i)) for i in range(11)])
        assert skills.count() == 8
        assert skills.get(["s0", "s1", "s2"]) == []


def test_collection_uses_lamarck_embedding(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus()[:2])
    chroma = lessons.chroma
    assert isinstance(chroma._embedding_function, MiniLMEmbedding)
    config = chroma.configuration
    assert config["embedding_function"] is not None and config["embedding_function"].name() == EMBEDDING_NAME
    assert config["hnsw"]["space"] == "cosine"
    # Opened without a function, Chroma embeds with the one rebuilt from the stored config: ours, not its default.
    reopened = memory.client.get_collection(chroma.name)
    assert isinstance(reopened.configuration["embedding_function"], MiniLMEmbedding)
    assert reopened.query(query_texts=["carry digits when adding"], n_results=1)["ids"] == [["arith-carry"]]


def test_persists_across_reopen(tmp_path: Path, memory_settings: MemorySettings) -> None:
    path = tmp_path / "chroma"
    with ChromaMemory.embedded(path, memory_settings) as memory:
        memory.lessons.add(corpus())
        memory.episodes.add([rec("ep1", "episode one", environment="arithmetic")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a legacy or unregistered embedding function would warn here
        with ChromaMemory.embedded(path, memory_settings) as memory:
            assert memory.lessons.count() == len(LESSONS) and memory.episodes.count() == 1
            assert memory.lessons.query("RecursionError in my function", k=1)[0].record.id == "recursion-base"
            assert memory.episodes.get(["ep1"])[0].metadata["environment"] == "arithmetic"


def test_add_with_precomputed_embeddings(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    records = corpus()
    vectors = memory.embedding.embed([r.text for r in records])
    lessons.add(records, vectors)
    assert lessons.query("RecursionError in my function", k=1)[0].record.id == "recursion-base"
    with pytest.raises(MemoryStoreError, match="1 embeddings for 2 records"):
        lessons.upsert([rec("x"), rec("y")], vectors[:1])


def test_query_vectors_answers_as_query_by_text(memory: ChromaMemory) -> None:
    lessons = memory.lessons
    lessons.add(corpus())
    texts = list(QUERIES)
    before = memory.embedding.stats.snapshot()
    vectors = lessons.embed(texts)
    assert (memory.embedding.stats.snapshot() - before).calls == 1 and len(vectors) == len(texts)
    where = {"environment": ["python", "arithmetic"]}
    by_vector = lessons.query_vectors(vectors, k=3, where=where)
    by_text = lessons.query(texts, k=3, where=where)  # the same texts: from the cache, no second model call
    assert (memory.embedding.stats.snapshot() - before).calls == 1
    assert [[h.record.id for h in hits] for hits in by_vector] == [[h.record.id for h in hits] for hits in by_text]
    assert lessons.embed([]) == [] and lessons.query_vectors([], k=3) == []
