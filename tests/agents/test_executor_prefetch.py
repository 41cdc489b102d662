"""The executor looks up skills and lessons for all its tasks at once (real skill library, lessons and Chroma),
and shows every attempt exactly what per-task look-ups would have shown it."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.toolbox import LessonHandle, SkillHandle
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.base import RetrievalQuery
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.lessons import LessonStore
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes, SandboxSettings
from lamarck.platform.storage.database import Database
from lamarck.skills_library.library import SkillLibrary
from lamarck.testing import ScriptedLLM, scripted_provider


@dataclass
class _Counted:
    """A skill or lesson source that counts its calls; ``batch`` False hides ``retrieve_many``."""

    source: Any
    batch: bool
    calls: list[str] = field(default_factory=list)

    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[Any]:
        self.calls.append("retrieve")
        return self.source.retrieve(query, environment=environment, k=k)

    def __getattr__(self, name: str) -> Any:
        if name != "retrieve_many" or not self.batch:
            raise AttributeError(name)

        def retrieve_many(queries: list[RetrievalQuery]) -> list[list[Any]]:
            self.calls.append(f"retrieve_many({len(queries)})")
            return self.source.retrieve_many(queries)

        return retrieve_many


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    mem = ChromaMemory.embedded(tmp_path / "chroma")
    yield mem
    mem.close()


@pytest.fixture
def library(sqlite_db: Database, memory: ChromaMemory) -> SkillLibrary:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed: apt-get install bubblewrap")
    sandbox = Sandbox(SandboxSettings(cpu_seconds=2, wall_seconds=10.0, memory_mb=512, processes=32))
    library = SkillLibrary(sqlite_db, sandbox, memory)
    library.ensure_builtins()
    return library


def _tasks() -> list[TaskSpec]:
    env = ArithmeticEnv()
    tasks = [env.generate(level, random.Random(seed)) for seed, level in enumerate((1, 2, 3, 4))]
    return [*tasks, tasks[1], TaskSpec(environment="chess", difficulty=1, prompt="Mate in two.")]


def _run(sources: tuple[Any, Any], tasks: list[TaskSpec]) -> list[Any]:
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/exec")), GatewaySettings(retries=0))
    with scripted_provider(ScriptedLLM(lambda messages, n: ["ANSWER: 5"] * n)):
        out = Executor(gateway, {"arithmetic": ArithmeticEnv()}, skills=sources[0], lessons=sources[1]).run(
            ExecutorInput(tasks=tasks, model_version="m", samples_per_task=2)
        )
    return [
        (a.task_index, [m.content for m in a.trajectory.messages[:1]], a.lessons_used, a.failure_reason)
        for a in out.attempts
    ]


def test_one_batch_look_up_per_source_shows_what_per_task_look_ups_show(
    sqlite_db: Database, memory: ChromaMemory, library: SkillLibrary
) -> None:
    lessons = LessonStore(sqlite_db, memory.lessons)
    for index, text in enumerate(
        [
            "Multiply before adding.",
            "Carry the one when a column passes nine.",
            "Check the sign after subtracting a larger number.",
        ]
    ):
        lessons.add(text, environment="arithmetic", episode_id=f"e{index}")
    tasks = _tasks()
    stats = memory.embedding.stats
    before = stats.snapshot()
    batched = (_Counted(library, batch=True), _Counted(lessons, batch=True))
    shown = _run(batched, tasks)
    cost = stats.snapshot() - before
    assert [s.calls for s in batched] == [["retrieve_many(4)"], ["retrieve_many(4)"]]  # the unknown env is not asked
    assert (cost.calls, cost.texts) == (1, 4)  # four distinct prompts, embedded once for skills and lessons both
    memory.embedding.cache.clear()
    per_task = (_Counted(library, batch=False), _Counted(lessons, batch=False))
    assert _run(per_task, tasks) == shown
    assert [len(s.calls) for s in per_task] == [5, 5]
    assert all(
        "Skills you can CALL" in system[0] and "Lessons from earlier attempts" in system[0]
        for _, system, _, _ in shown[:10]
    )
    assert all(failure is None for _, _, _, failure in shown[:10])
    assert shown[-1][3] == "unknown environment 'chess' for this executor"


def test_sources_without_a_batch_form_are_asked_per_task() -> None:
    class Lessons:
        def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]:
            return [LessonHandle(f"L-{query[:8]}", "Read twice.")]

    class Skills:
        def retrieve(self, query: str, *, environment: str | None, k: int) -> list[SkillHandle]:
            return []

    shown = _run((Skills(), Lessons()), _tasks())
    assert [lessons for _, _, lessons, _ in shown[:2]] == [[f"L-{_tasks()[0].prompt[:8]}"]] * 2
