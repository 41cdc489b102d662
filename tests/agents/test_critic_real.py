"""The critic with the real local model on a handful of episodes, lessons in a real Chroma directory."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.lessons import LessonStore
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.trajectory import Message, Trajectory


@pytest.mark.slow
def test_critic_with_the_real_model(local_gateway, sqlite_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = ArithmeticEnv()
    memory = ChromaMemory.embedded(tmp_path / "chroma")
    lessons = LessonStore(sqlite_db, memory.lessons)
    episodes = []
    for seed in range(4):
        task = env.generate(1, random.Random(seed))
        answer = str(task.reference["answer"] + (seed % 2))
        trajectory = Trajectory(
            messages=[
                Message(role="user", content=task.prompt),
                Message(role="assistant", content=f"ANSWER: {answer}"),
            ]
        )
        with sqlite_db.session() as session:
            task_id = repo.add_task(session, environment="arithmetic", difficulty=1, prompt=task.prompt).id
            episode_id = repo.record_episode(
                session, task_id=task_id, model_version="smollm2-135m", trajectory=trajectory, answer=answer
            ).id
        episodes.append(EpisodeForReview(episode_id=episode_id, task=task, answer=answer, trajectory=trajectory))
    out = Critic(local_gateway, {"arithmetic": env}, sqlite_db, lessons=lessons).run(CriticInput(episodes=episodes))
    memory.close()
    assert [v.passed for v in out.verdicts] == [True, False, True, False]
    assert all(v.source in ("verifier", "both") for v in out.verdicts)
    with sqlite_db.session() as session:
        for verdict in out.verdicts:
            assert len(repo.verdicts_for_episode(session, episode_id=verdict.episode_id)) == 1
            if verdict.repaired_episode_id:
                repaired = repo.get_episode(session, episode_id=verdict.repaired_episode_id)
                assert repaired.outcome == "passed"
        assert repo.llm_usage(session)["calls"] >= 4
