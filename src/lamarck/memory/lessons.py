"""Lessons: short, reusable advice, kept in SQL (the record) and in vector memory (for retrieval).

Curation follows ACE's curator: a new lesson that is nearly identical to an active one
is merged into it (``times_seen`` grows, its provenance gains the episode) instead of
being stored twice. Each episode that was shown a lesson counts for it (helpful when
the episode passed) or against it (harmful when it failed); a lesson that keeps
hurting is retired — kept for the record, never offered again. The vector collection
is bounded; its ``utility`` metadata (helpful - harmful) decides what is evicted first.

Embedding is the slow part (a model call), so a generation batches it: ``retrieve_many`` embeds all its
prompts in one call, and the critic embeds its lessons with ``embed`` before adding them one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lamarck.memory.base import UTILITY, Embedding, LessonHandle, MemoryCollection, MemoryRecord, RetrievalQuery
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Lesson

MAX_LESSON_CHARS = 400
RETIRE_AFTER = 5
RETIRE_HARM_SHARE = 0.7


@dataclass(frozen=True)
class LessonWrite:
    lesson_id: str
    merged: bool


class LessonStore:
    def __init__(self, db: Database, collection: MemoryCollection, *, dedup_distance: float = 0.15) -> None:
        self.db = db
        self.collection = collection
        self.dedup_distance = dedup_distance

    def add(
        self, text: str, *, environment: str | None, episode_id: str, embedding: Embedding | None = None
    ) -> LessonWrite:
        """Store a lesson, or merge it into a near-identical active one (an episode is counted once).

        ``embedding``, from ``embed``, saves embedding the text again."""
        text = _clean(text)
        if not text:
            raise ValueError("a lesson needs some text")
        if embedding is None:
            embedding = self.collection.embed([text])[0]
        twin = self._twin(embedding, environment)
        with self.db.session() as session:
            if twin is not None:
                lesson = session.get(Lesson, twin)
                if lesson is not None and lesson.status == "active":
                    if episode_id not in lesson.source_episode_ids:
                        lesson.times_seen += 1
                        lesson.source_episode_ids = [*lesson.source_episode_ids, episode_id]
                    return LessonWrite(lesson.id, merged=True)
            lesson = repo.add_lesson(session, text=text, environment=environment, source_episode_ids=[episode_id])
            lesson_id = lesson.id
        record = MemoryRecord(id=lesson_id, text=text, metadata=_metadata(environment, 0.0))
        self.collection.upsert([record], [embedding])
        return LessonWrite(lesson_id, merged=False)

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """The vectors ``add`` would compute for these lesson texts, all in one embedding call."""
        return self.collection.embed([_clean(text) for text in texts])

    def _twin(self, embedding: Embedding, environment: str | None) -> str | None:
        where = {"status": "active", "environment": environment or ""}
        hits = self.collection.query_vectors([embedding], k=1, where=where)[0]
        if hits and hits[0].distance <= self.dedup_distance:
            return hits[0].record.id
        return None

    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]:
        return self.retrieve_many([RetrievalQuery(query, environment, k)])[0]

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[LessonHandle]]:
        """Each query's active lessons from its environment, closest first; all texts embedded in one call."""
        found: list[list[LessonHandle]] = [[] for _ in queries]
        live = [index for index, query in enumerate(queries) if query.k > 0]
        if not live or self.collection.count() == 0:
            return found
        texts = list(dict.fromkeys(queries[index].text for index in live))
        vectors = dict(zip(texts, self.collection.embed(texts), strict=True))
        groups: dict[tuple[str, int], list[int]] = {}
        for index in live:
            groups.setdefault((queries[index].environment or "", queries[index].k), []).append(index)
        used: dict[str, None] = {}
        for (environment, k), indices in groups.items():
            where = {"status": "active", "environment": environment}
            hits = self.collection.query_vectors([vectors[queries[i].text] for i in indices], k=k, where=where)
            for index, row in zip(indices, hits, strict=True):
                found[index] = [LessonHandle(id=hit.record.id, text=hit.record.text) for hit in row]
                used.update(dict.fromkeys(hit.record.id for hit in row))
        if used:
            self.collection.touch(list(used))
        return found

    def credit(self, lesson_ids: Sequence[str], *, passed: bool) -> list[str]:
        """Count an episode's outcome for the lessons it was shown; returns the ids retired by this call."""
        retired: list[str] = []
        with self.db.session() as session:
            for lesson_id in dict.fromkeys(lesson_ids):
                lesson = session.get(Lesson, lesson_id)
                if lesson is None:
                    continue
                if passed:
                    lesson.helpful += 1
                else:
                    lesson.harmful += 1
                uses = lesson.helpful + lesson.harmful
                if lesson.status == "active" and uses >= RETIRE_AFTER and lesson.harmful / uses >= RETIRE_HARM_SHARE:
                    lesson.status = "retired"
                    retired.append(lesson.id)
                self.collection.update_metadata(
                    [lesson.id], {UTILITY: float(lesson.helpful - lesson.harmful), "status": lesson.status}
                )
        return retired

    def get(self, lesson_id: str) -> Lesson | None:
        with self.db.session() as session:
            return session.get(Lesson, lesson_id)


def _clean(text: str) -> str:
    return " ".join(text.split())[:MAX_LESSON_CHARS]


def _metadata(environment: str | None, utility: float) -> dict[str, str | float]:
    return {"environment": environment or "", "status": "active", UTILITY: utility}
