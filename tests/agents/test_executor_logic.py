"""Executor loop logic with a scripted model: tool calls, malformed calls, budget, answers, batching, recording."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from lamarck.agents.episodes import record_attempts
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.harness import default_harness
from lamarck.agents.toolbox import LessonHandle, SkillHandle
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider


@pytest.fixture
def env() -> ArithmeticEnv:
    return ArithmeticEnv()


def _gateway(db: Database | None = None) -> LLMGateway:
    return LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/exec")), GatewaySettings(retries=0), db=db)


def _own(messages: list[Any]) -> list[Any]:
    """The attempt's own messages, without the harness's worked example."""
    return [m for m in messages if not m.meta.get("few_shot")]


def _last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


@pytest.fixture
def model() -> Iterator[ScriptedLLM]:
    """Uses the calculator on the task's numbers, then answers with the calculator's result."""

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        last = _last_user(messages)
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ')}"] * n
        return ["I will compute it.\nCALL calculator: 2 + 3"] * n

    with scripted_provider(ScriptedLLM(respond)) as handler:
        yield handler


def test_tool_call_observation_then_answer(model: ScriptedLLM, env: ArithmeticEnv) -> None:
    task = env.generate(1, random.Random(0))
    out = Executor(_gateway(), {"arithmetic": env}).run(
        ExecutorInput(tasks=[task], model_version="m", samples_per_task=2)
    )
    assert len(out.attempts) == 2
    attempt = out.attempts[0]
    messages = _own(attempt.trajectory.messages)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = messages[2].tool_calls[0]
    assert call.name == "calculator" and '"2 + 3"' in call.arguments
    assert messages[3].content == "5"
    assert attempt.answer == "5" and attempt.failure_reason is None and attempt.steps == 2


def test_first_step_asks_for_all_samples_in_one_call(model: ScriptedLLM, env: ArithmeticEnv) -> None:
    tasks = [env.generate(1, random.Random(i)) for i in range(3)]
    out = Executor(_gateway(), {"arithmetic": env}).run(
        ExecutorInput(tasks=tasks, model_version="m", samples_per_task=4)
    )
    first_calls = [c for c in model.calls if (c.get("optional_params") or {}).get("n") == 4]
    assert len(first_calls) == 3
    assert out.model_calls == 3 + 12
    assert len(out.attempts) == 12


def test_malformed_call_becomes_feedback_not_a_crash(env: ArithmeticEnv) -> None:
    handler = ScriptedLLM()
    handler.script = ["CALL python: import os", "CALL:", "ANSWER: 7"]
    with scripted_provider(handler):
        out = Executor(_gateway(), {"arithmetic": env}).run(
            ExecutorInput(tasks=[env.generate(1, random.Random(1))], model_version="m", samples_per_task=1)
        )
    messages = _own(out.attempts[0].trajectory.messages)
    assert "unknown tool 'python'" in messages[3].content
    assert "CALL without a tool name" in messages[5].content
    assert out.attempts[0].answer == "7"


def test_step_budget_ends_the_attempt_with_a_reason(env: ArithmeticEnv) -> None:
    handler = ScriptedLLM(lambda messages, n: ["CALL calculator: 1+1"] * n)
    harness = default_harness("arithmetic").derive(step_budget=3)
    with scripted_provider(handler):
        out = Executor(_gateway(), {"arithmetic": env}).run(
            ExecutorInput(
                tasks=[env.generate(1, random.Random(2))],
                model_version="m",
                harnesses={"arithmetic": harness},
                samples_per_task=1,
            )
        )
    attempt = out.attempts[0]
    assert attempt.answer is None and attempt.steps == 3
    assert "step budget of 3 exhausted" in attempt.failure_reason


def test_unusable_tasks_fail_with_the_reason_without_model_calls(env: ArithmeticEnv) -> None:
    handler = ScriptedLLM()
    task = env.generate(1, random.Random(3))
    empty = task.model_copy(update={"prompt": "  "})
    alien = task.model_copy(update={"environment": "chess"})
    with scripted_provider(handler):
        out = Executor(_gateway(), {"arithmetic": env}).run(
            ExecutorInput(tasks=[empty, alien], model_version="m", samples_per_task=1)
        )
    assert [a.failure_reason for a in out.attempts] == [
        "the task has an empty prompt",
        "unknown environment 'chess' for this executor",
    ]
    assert handler.calls == []


class _Skills:
    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[SkillHandle]:
        return [SkillHandle("double", "double(x: int) -> int", "Twice x.", lambda arg: str(2 * int(arg)))]


class _Lessons:
    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]:
        return [LessonHandle("L1", "Check the units before answering.")]


def test_skills_and_lessons_are_offered_used_and_recorded(env: ArithmeticEnv, sqlite_db: Database) -> None:
    handler = ScriptedLLM()
    handler.script = ["CALL double: 21", "ANSWER: 42"]
    task = env.generate(2, random.Random(4))
    with scripted_provider(handler):
        out = Executor(_gateway(sqlite_db), {"arithmetic": env}, skills=_Skills(), lessons=_Lessons()).run(
            ExecutorInput(tasks=[task], model_version="m", samples_per_task=1)
        )
    attempt = out.attempts[0]
    system = attempt.trajectory.messages[0].content
    assert "double(x: int) -> int" in system and "Check the units" in system
    assert attempt.skills_used == ["double"] and attempt.lessons_used == ["L1"]
    with sqlite_db.session() as session:
        task_id = repo.add_task(
            session, environment=task.environment, difficulty=task.difficulty, prompt=task.prompt
        ).id
    ids = record_attempts(sqlite_db, out.attempts, task_ids=[task_id], model_version="m", key_prefix="run1:g0")
    again = record_attempts(sqlite_db, out.attempts, task_ids=[task_id], model_version="m", key_prefix="run1:g0")
    assert ids == again
    with sqlite_db.session() as session:
        episode = repo.get_episode(session, episode_id=ids[0])
        assert episode.skills_used == ["double"] and episode.answer == "42"
        assert episode.harness_version == attempt.harness_version
        assert repo.episode_trajectory(episode) == attempt.trajectory
