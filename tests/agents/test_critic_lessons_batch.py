"""The critic embeds a review's lessons in one call (real embeddings, real Chroma), then curates them in order."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.lessons import LessonStore
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import Message, Trajectory
from lamarck.testing import ScriptedLLM, scripted_provider

LESSONS = [
    "Write down each intermediate total.",
    "Multiply before adding.",
    "Write down each intermediate total.",
    "Check the sign of the result.",
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    mem = ChromaMemory.embedded(tmp_path / "chroma")
    yield mem
    mem.close()


def _episodes(db: Database) -> list[EpisodeForReview]:
    episodes = []
    for seed in range(len(LESSONS)):
        task = ArithmeticEnv().generate(2, random.Random(seed))
        trajectory = Trajectory(
            messages=[Message(role="user", content=task.prompt), Message(role="assistant", content="ANSWER: -1")]
        )
        with db.session() as session:
            task_id = repo.add_task(session, environment="arithmetic", difficulty=2, prompt=task.prompt).id
            episode_id = repo.record_episode(
                session, task_id=task_id, model_version="m", trajectory=trajectory, answer="-1"
            ).id
        episodes.append(EpisodeForReview(episode_id=episode_id, task=task, answer="-1", trajectory=trajectory))
    return episodes


def test_lessons_are_embedded_together_and_curated_in_order(sqlite_db: Database, memory: ChromaMemory) -> None:
    episodes = _episodes(sqlite_db)
    lesson_of = {e.task.prompt: lesson for e, lesson in zip(episodes, LESSONS, strict=True)}

    def judge(messages: list[dict[str, Any]], n: int) -> list[str]:
        prompt = messages[-1]["content"]
        lesson = next(text for task, text in lesson_of.items() if task in prompt)
        return [f"VERDICT: fail\nCRITIQUE: Wrong.\nLESSON: {lesson}"] * n

    gateway = LLMGateway(ModelRoutes(critic=ModelRoute(model="scripted/judge")), GatewaySettings(retries=0))
    critic = Critic(gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db, lessons=LessonStore(sqlite_db, memory.lessons))
    before = memory.embedding.stats.snapshot()
    with scripted_provider(ScriptedLLM(judge)):
        out = critic.run(CriticInput(episodes=episodes, repair=False))
    cost = memory.embedding.stats.snapshot() - before
    assert (cost.calls, cost.texts) == (1, 3)  # three distinct lessons, one embedding call for the review
    assert (out.lessons_added, out.lessons_merged, out.memory_errors) == (3, 1, [])
    ids = [v.lesson_id for v in out.verdicts]
    assert ids[0] == ids[2] and len(set(ids)) == 3
