"""Lessons in batches: one embedding call for a generation's prompts or lessons, the same answers as one by one."""

from __future__ import annotations

from lamarck.memory.base import RetrievalQuery
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.lessons import LessonStore
from lamarck.platform.storage.database import Database

LESSONS = [
    ("arithmetic", "Carry the one into the next column when a digit sum passes nine."),
    ("arithmetic", "Multiply before adding unless parentheses say otherwise."),
    ("arithmetic", "Check the sign of the result after subtracting a larger number."),
    ("arithmetic", "Convert percentages to fractions before multiplying."),
    ("string_ops", "Reverse the string before taking the first characters when asked for the last ones."),
    ("string_ops", "Count vowels case-insensitively."),
    ("string_ops", "Strip spaces at both ends before comparing strings."),
]
QUERIES = [
    RetrievalQuery("What is 487 + 968?", "arithmetic", 2),
    RetrievalQuery("Compute 15% of 240.", "arithmetic", 2),
    RetrievalQuery("Return the last 3 characters of 'lamarck', reversed.", "string_ops", 2),
    RetrievalQuery("What is 12 - 30 * 2?", "arithmetic", 3),
    RetrievalQuery("What is 487 + 968?", "arithmetic", 2),  # a repeated prompt
    RetrievalQuery("How many vowels are in 'Evolution'?", "string_ops", 1),
    RetrievalQuery("Sort these words.", "python_functions", 2),  # no lessons there
    RetrievalQuery("What is 2 + 2?", "arithmetic", 0),  # a harness that shows no lessons
]


def _store(db: Database, memory: ChromaMemory) -> LessonStore:
    store = LessonStore(db, memory.lessons)
    for index, (environment, text) in enumerate(LESSONS):
        assert not store.add(text, environment=environment, episode_id=f"e{index}").merged
    return store


def test_batch_retrieval_matches_one_by_one_in_one_embedding_call(sqlite_db: Database, memory: ChromaMemory) -> None:
    store = _store(sqlite_db, memory)
    stats = memory.embedding.stats
    before = stats.snapshot()
    batch = store.retrieve_many(QUERIES)
    cost = stats.snapshot() - before
    assert (cost.calls, cost.texts) == (1, 6)  # six distinct prompts with k > 0, embedded together
    memory.embedding.cache.clear()
    before = stats.snapshot()
    one_by_one = [store.retrieve(q.text, environment=q.environment, k=q.k) for q in QUERIES]
    assert (stats.snapshot() - before).calls == 6  # every look-up embeds alone (the repeat from the cache)
    assert batch == one_by_one
    assert [len(found) for found in batch] == [2, 2, 2, 3, 2, 1, 0, 0]
    for query, found in zip(QUERIES[:6], batch[:6], strict=True):  # the same as asking the collection by text
        hits = memory.lessons.query(query.text, k=query.k, where={"status": "active", "environment": query.environment})
        assert [h.id for h in found] == [hit.record.id for hit in hits]
    assert "Convert percentages" in batch[1][0].text and "vowels" in batch[5][0].text


def test_lessons_embedded_together_are_stored_as_one_by_one(sqlite_db: Database, memory: ChromaMemory) -> None:
    store = LessonStore(sqlite_db, memory.lessons)
    texts = ["Write down each intermediate total.", "Write  down each intermediate total. ", "Count vowels."]
    stats = memory.embedding.stats
    before = stats.snapshot()
    vectors = store.embed(texts)
    cost = stats.snapshot() - before
    assert (cost.calls, cost.texts, cost.cache_hits) == (1, 2, 1)  # the two spellings of one lesson embed once
    writes = [
        store.add(text, environment="arithmetic", episode_id=f"e{i}", embedding=vector)
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    ]
    assert (stats.snapshot() - before).calls == 1  # adding with vectors embeds nothing more
    assert [w.merged for w in writes] == [False, True, False] and writes[0].lesson_id == writes[1].lesson_id
    plain = store.add("Count vowels.", environment="arithmetic", episode_id="e9")  # embeds itself, the same twin
    assert plain.merged and plain.lesson_id == writes[2].lesson_id
