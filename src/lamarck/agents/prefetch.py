"""Skills and lessons for all of an executor request's tasks, looked up together before the rollouts start.

Retrieval embeds each task's prompt, and one model call per prompt is slow under load; a source with a batch
form (``retrieve_many``) answers all the tasks in one call instead. A source without one is asked per task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lamarck.memory.base import BatchLessonSource, LessonHandle, LessonSource, RetrievalQuery
from lamarck.skills_library.skill import BatchSkillSource, SkillHandle, SkillSource


@dataclass(frozen=True)
class Prefetched:
    request: object  # what it was looked up for, compared by identity
    skills: dict[RetrievalQuery, list[SkillHandle]] = field(default_factory=dict)
    lessons: dict[RetrievalQuery, list[LessonHandle]] = field(default_factory=dict)


def prefetch(
    request: object,
    *,
    skills: SkillSource | None,
    skill_queries: Sequence[RetrievalQuery],
    lessons: LessonSource | None,
    lesson_queries: Sequence[RetrievalQuery],
) -> Prefetched:
    found = Prefetched(request)
    if isinstance(skills, BatchSkillSource) and skill_queries:
        unique = list(dict.fromkeys(skill_queries))
        found.skills.update(zip(unique, skills.retrieve_many(unique), strict=True))
    if isinstance(lessons, BatchLessonSource) and lesson_queries:
        unique = list(dict.fromkeys(lesson_queries))
        found.lessons.update(zip(unique, lessons.retrieve_many(unique), strict=True))
    return found


class PrefetchSlot:
    """Holds the look-ups of the request whose rollouts are being set up, from its first task to its last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Prefetched | None = None

    def get(self, request: object, build: Callable[[], Prefetched], *, last: bool) -> Prefetched:
        with self._lock:
            held = self._held
            if held is None or held.request is not request:
                held = build()
            self._held = None if last else held
            return held
