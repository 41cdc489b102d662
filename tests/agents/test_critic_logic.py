"""Critic logic with a scripted judge: ground truth wins, lessons are curated, repairs are verified, nothing twice."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview, judge_agreement, parse_judge
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.lessons import LessonStore
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Lesson, Verdict
from lamarck.platform.storage.trajectory import Message, Trajectory
from lamarck.testing import ScriptedLLM, scripted_provider

LYING_JUDGE = (
    "VERDICT: pass\nFIRST_ERROR: none\nCRITIQUE: Looks right to me.\nLESSON: Use the calculator for every step."
)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    mem = ChromaMemory.embedded(tmp_path / "chroma")
    yield mem
    mem.close()


def _gateway(db: Database) -> LLMGateway:
    return LLMGateway(ModelRoutes(critic=ModelRoute(model="scripted/judge")), GatewaySettings(retries=0), db=db)


def _episode(db: Database, task: TaskSpec, answer: str | None, lessons: list[str] | None = None) -> EpisodeForReview:
    trajectory = Trajectory(
        messages=[
            Message(role="system", content="solve"),
            Message(role="user", content=task.prompt),
            Message(role="assistant", content=f"ANSWER: {answer}"),
        ]
    )
    with db.session() as session:
        task_id = repo.add_task(
            session, environment=task.environment, difficulty=task.difficulty, prompt=task.prompt
        ).id
        episode_id = repo.record_episode(
            session, task_id=task_id, model_version="m", harness_version="h1", trajectory=trajectory, answer=answer
        ).id
    return EpisodeForReview(
        episode_id=episode_id, task=task, answer=answer, trajectory=trajectory, lessons_used=lessons or []
    )


def _task(seed: int = 0) -> TaskSpec:
    return ArithmeticEnv().generate(2, random.Random(seed))


def test_verifier_overrides_a_judge_that_claims_success(sqlite_db: Database) -> None:
    task = _task()
    wrong = str(int(task.reference["answer"]) + 1)
    with scripted_provider(ScriptedLLM(lambda m, n: [LYING_JUDGE] * n)):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db).run(
            CriticInput(episodes=[_episode(sqlite_db, task, wrong)], repair=False)
        )
    verdict = out.verdicts[0]
    assert (verdict.passed, verdict.reward, verdict.source, verdict.judge_passed) == (False, 0.0, "both", True)
    assert (verdict.verifier_passed, verdict.agree) == (False, False)
    with sqlite_db.session() as session:
        assert repo.get_episode(session, episode_id=verdict.episode_id).outcome == "failed"
        assert judge_agreement(session) == [
            {"critic_model": "scripted/judge", "harness_version": "h1", "n": 1, "agreement": 0.0}
        ]


def test_judge_decides_only_where_there_is_no_verifier(sqlite_db: Database) -> None:
    task = TaskSpec(environment="user", difficulty=1, prompt="Name a prime number.")
    with scripted_provider(ScriptedLLM(lambda m, n: [LYING_JUDGE] * n)):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db).run(
            CriticInput(episodes=[_episode(sqlite_db, task, "7")])
        )
    assert (out.verdicts[0].passed, out.verdicts[0].source) == (True, "judge")


def test_malformed_judge_or_dead_judge_keeps_the_verifier_verdict(sqlite_db: Database) -> None:
    task = _task(1)
    right = str(task.reference["answer"])
    with scripted_provider(ScriptedLLM(lambda m, n: ["I think this is fine overall."] * n)):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db).run(
            CriticInput(episodes=[_episode(sqlite_db, task, right)])
        )
    assert (out.verdicts[0].passed, out.verdicts[0].source, out.judge_malformed) == (True, "verifier", 1)
    dead = ScriptedLLM()
    dead.script = [RuntimeError("judge crashed")] * 4
    with scripted_provider(dead):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db).run(
            CriticInput(episodes=[_episode(sqlite_db, task, "0")])
        )
    assert (out.verdicts[0].passed, out.verdicts[0].source) == (False, "verifier")


def test_repairs_are_kept_only_when_they_pass(sqlite_db: Database) -> None:
    good, bad = _task(2), _task(3)

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        prompt = messages[-1]["content"]
        if "got this task wrong" in prompt:
            target = good if good.prompt in prompt else bad
            answer = int(target.reference["answer"]) + (0 if target is good else 5)
            return [f"Let me redo it.\nANSWER: {answer}"] * n
        return ["VERDICT: fail\nFIRST_ERROR: 1\nCRITIQUE: Wrong sum.\nLESSON: Add step by step."] * n

    episodes = [_episode(sqlite_db, good, "-1"), _episode(sqlite_db, bad, "-1")]
    with scripted_provider(ScriptedLLM(respond)):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db).run(
            CriticInput(episodes=episodes)
        )
    repaired_id = out.verdicts[0].repaired_episode_id
    assert repaired_id is not None and out.verdicts[1].repaired_episode_id is None and out.repaired == 1
    assert out.verdicts[0].critique == "first error at step 1: Wrong sum."
    with sqlite_db.session() as session:
        repaired = repo.get_episode(session, episode_id=repaired_id)
        assert repaired.repaired_from_id == episodes[0].episode_id and repaired.outcome == "passed"
        messages = repo.episode_trajectory(repaired).messages
        assert messages[-1].meta == {"repaired": True}
        assert not any("got this task wrong" in (m.content or "") for m in messages)


def test_lessons_are_merged_counted_credited_and_retired(sqlite_db: Database, memory: ChromaMemory) -> None:
    lessons = LessonStore(sqlite_db, memory.lessons)
    judge = "VERDICT: fail\nFIRST_ERROR: 2\nCRITIQUE: Skipped a step.\nLESSON: Write down each intermediate total."
    critic = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db, lessons=lessons)
    with scripted_provider(ScriptedLLM(lambda m, n: [judge] * n)):
        out = critic.run(CriticInput(episodes=[_episode(sqlite_db, _task(i), "-1") for i in range(3)], repair=False))
    assert (out.lessons_added, out.lessons_merged) == (1, 2)
    lesson_id = out.verdicts[0].lesson_id
    assert {v.lesson_id for v in out.verdicts} == {lesson_id}
    with sqlite_db.session() as session:
        lesson = session.get(Lesson, lesson_id)
        assert lesson.times_seen == 3 and len(lesson.source_episode_ids) == 3
    assert [h.id for h in lessons.retrieve("intermediate totals", environment="arithmetic", k=3)] == [lesson_id]
    assert lessons.retrieve("intermediate totals", environment="string_ops", k=3) == []
    retired: list[str] = []
    for _ in range(5):
        retired += lessons.credit([lesson_id], passed=False)
    assert retired == [lesson_id]
    assert lessons.retrieve("intermediate totals", environment="arithmetic", k=3) == []


def test_reviewing_twice_changes_nothing(sqlite_db: Database, memory: ChromaMemory) -> None:
    lessons = LessonStore(sqlite_db, memory.lessons)
    critic = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db, lessons=lessons)
    episode = _episode(sqlite_db, _task(4), "-1")
    with scripted_provider(ScriptedLLM(lambda m, n: ["VERDICT: fail\nCRITIQUE: no.\nLESSON: Check the question."] * n)):
        first = critic.run(CriticInput(episodes=[episode], repair=False))
        second = critic.run(CriticInput(episodes=[episode], repair=False))
    assert second.verdicts[0].reused and second.verdicts[0].lesson_id == first.verdicts[0].lesson_id
    with sqlite_db.session() as session:
        assert session.query(Verdict).count() == 1 and session.query(Lesson).count() == 1


def test_empty_and_huge_episodes_get_clear_verdicts(sqlite_db: Database) -> None:
    task = _task(5)
    empty = _episode(sqlite_db, task, None).model_copy(update={"failure_reason": "step budget exhausted"})
    huge = _episode(sqlite_db, task, "1" * 100_000)
    out = Critic(None, {"arithmetic": ArithmeticEnv()}, sqlite_db).run(CriticInput(episodes=[empty, huge]))
    assert [(v.passed, v.source) for v in out.verdicts] == [(False, "verifier"), (False, "verifier")]
    assert out.verdicts[0].details == "step budget exhausted"


@pytest.mark.parametrize(
    ("reply", "passed", "well_formed"),
    [
        ("VERDICT: fail\nFIRST_ERROR: 3\nCRITIQUE: c\nLESSON: l", False, True),
        ("**VERDICT**: Pass\nLESSON: keep going", True, True),
        ("verdict = fail", False, False),
        ("no idea", None, False),
    ],
)
def test_parse_judge(reply: str, passed: bool | None, well_formed: bool) -> None:
    parsed = parse_judge(reply)
    assert (parsed.passed, parsed.well_formed) == (passed, well_formed)


class _DownCollection:
    """A lessons collection whose Chroma server has gone away."""

    name = "lessons"
    max_entries = 10

    def __getattr__(self, attribute: str) -> Any:
        from lamarck.memory.base import MemoryUnavailable

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise MemoryUnavailable("vector memory at http://127.0.0.1:9 is unavailable: start the server")

        return fail


def test_a_down_memory_server_loses_no_verdict(sqlite_db: Database) -> None:
    lessons = LessonStore(sqlite_db, _DownCollection())  # type: ignore[arg-type]
    critic = Critic(_gateway(sqlite_db), {"arithmetic": ArithmeticEnv()}, sqlite_db, lessons=lessons)
    episode = _episode(sqlite_db, _task(6), "-1", lessons=["L-old"])
    with scripted_provider(ScriptedLLM(lambda m, n: ["VERDICT: fail\nCRITIQUE: no.\nLESSON: Check the question."] * n)):
        out = critic.run(CriticInput(episodes=[episode], repair=False))
    assert out.verdicts[0].passed is False and out.verdicts[0].lesson_id is None
    assert len(out.memory_errors) == 1 and "start the server" in out.memory_errors[0]
    with sqlite_db.session() as session:
        assert session.query(Verdict).count() == 1 and session.query(Lesson).count() == 0
