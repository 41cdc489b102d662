"""Lessons: short, reusable advice, kept in SQL (the record) and in vector memory (for retrieval).

Curation follows ACE's curator: a new lesson that is nearly identical to an active one
is merged into it (``times_seen`` grows, its provenance gains the episode) instead of
being stored twice. Each episode that was shown a lesson counts for it (helpful when
the episode passed) or against it (harmful when it failed); a lesson that keeps
hurting is retired — kept for the record, never offered again. The vector collection
is bounded; its ``utility`` metadata (helpful - harmful) decides what is evicted first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lamarck.memory.base import UTILITY, LessonHandle, MemoryCollection, MemoryRecord
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

    def add(self, text: str, *, environment: str | None, episode_id: str) -> LessonWrite:
        """Store a lesson, or merge it into a near-identical active one (an episode is counted once)."""
        text = " ".join(text.split())[:MAX_LESSON_CHARS]
        if not text:
            raise ValueError("a lesson needs some text")
        twin = self._twin(text, environment)
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
        self.collection.upsert([MemoryRecord(id=lesson_id, text=text, metadata=_metadata(environment, 0.0))])
        return LessonWrite(lesson_id, merged=False)

    def _twin(self, text: str, environment: str | None) -> str | None:
        where = {"status": "active", "environment": environment or ""}
        hits = self.collection.query(text, k=1, where=where)
        if hits and hits[0].distance <= self.dedup_distance:
            return hits[0].record.id
        return None

    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]:
        if k <= 0 or self.collection.count() == 0:
            return []
        hits = self.collection.query(query, k=k, where={"status": "active", "environment": environment or ""})
        if hits:
            self.collection.touch([hit.record.id for hit in hits])
        return [LessonHandle(id=hit.record.id, text=hit.record.text) for hit in hits]

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


def _metadata(environment: str | None, utility: float) -> dict[str, str | float]:
    return {"environment": environment or "", "status": "active", UTILITY: utility}
