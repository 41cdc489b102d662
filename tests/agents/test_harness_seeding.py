"""Seeding rollouts for the harness-critic: training tasks only, recorded and verified as the loop records them, and
the demonstrations source then finds exactly the verified successes that were recorded."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from lamarck.agents.demonstrations import verified_examples
from lamarck.agents.executor import Executor
from lamarck.agents.harness import default_harness
from lamarck.agents.harness_seeding import TASK_SOURCE, HeldoutLeak, seed_rollouts
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv, Split
from lamarck.curriculum.heldout import DRAW_SEEDS, dev_set, is_heldout_task
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Task
from lamarck.testing import ScriptedLLM, scripted_provider

HARNESS = default_harness("arithmetic").derive(sampling={"samples_per_task": 2})


class RecordingArithmetic(ArithmeticEnv):
    """Arithmetic that remembers every task it generated, so a scripted model can know the answers."""

    def __init__(self) -> None:
        super().__init__()
        self.generated: dict[str, dict[str, Any]] = {}

    def generate(self, difficulty: int, rng: random.Random, *, split: Split = "train") -> TaskSpec:
        task = super().generate(difficulty, rng, split=split)
        self.generated[task.prompt] = dict(task.reference)
        return task


def _oracle(env: RecordingArithmetic) -> ScriptedLLM:
    """Solves with the calculator the tasks whose answer is even; answers the odd ones off by one, without work."""

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ').strip()}"] * n
        reference = next(ref for prompt, ref in env.generated.items() if prompt in last)
        if reference["answer"] % 2 == 0:
            return [f"CALL calculator: {reference['expression']}"] * n
        return [f"ANSWER: {reference['answer'] + 1}"] * n

    return ScriptedLLM(respond)


@pytest.fixture
def env() -> RecordingArithmetic:
    return RecordingArithmetic()


@pytest.fixture
def executor(env: RecordingArithmetic) -> Iterator[Executor]:
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/exec")), GatewaySettings(retries=0))
    with scripted_provider(_oracle(env)):
        yield Executor(gateway, {"arithmetic": env})


def test_seeding_records_training_attempts_and_the_demonstrations_source_sees_its_successes(
    sqlite_db: Database, env: RecordingArithmetic, executor: Executor
) -> None:
    report = seed_rollouts(
        sqlite_db, executor, env, HARNESS, model_version="m", seconds=600, levels=[1, 2, 3], per_level=2, max_batches=2
    )
    assert (report.batches, report.tasks, report.attempts) == (2, 12, 24)
    assert report.seeds and all(seed in DRAW_SEEDS for seed in report.seeds)
    with sqlite_db.session() as session:
        rows = session.execute(select(Episode, Task).join(Task, Task.id == Episode.task_id)).tuples().all()
        assert len(rows) == 24 and {task.id for _, task in rows} == set(report.task_ids)
        assert all(task.source == TASK_SOURCE for _, task in rows)
        for episode, task in rows:
            spec = TaskSpec(environment="arithmetic", difficulty=task.difficulty, prompt=task.prompt)
            assert not is_heldout_task(spec.model_copy(update={"reference": task.reference}), env=env)
            even = task.reference["answer"] % 2 == 0
            assert episode.outcome == ("passed" if even else "failed")
            assert episode.harness_version == HARNESS.version_id
        solved = {task.prompt for episode, task in rows if episode.outcome == "passed"}
    assert report.passed == 2 * len(solved) == sum(report.passed_by_level.values())
    assert solved and len(solved) < 12  # the draw holds both even and odd answers, or the test proves nothing
    pool = verified_examples(sqlite_db, "arithmetic", limit=100)
    assert {example.task for _, example in pool} == solved


def test_a_reserved_task_stops_seeding_before_anything_runs_or_is_recorded(
    sqlite_db: Database, env: RecordingArithmetic, executor: Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    reserved = dev_set("arithmetic", per_level=1, env=env)[0]
    monkeypatch.setattr("lamarck.agents.harness_seeding.training_task", lambda *_args, **_kw: reserved)
    with pytest.raises(HeldoutLeak, match="training tasks only"):
        seed_rollouts(sqlite_db, executor, env, HARNESS, model_version="m", seconds=600, levels=[1], max_batches=1)
    with sqlite_db.session() as session:
        assert session.scalars(select(Task)).all() == [] and session.scalars(select(Episode)).all() == []


def test_bad_settings_are_refused_and_no_time_runs_nothing(
    sqlite_db: Database, env: RecordingArithmetic, executor: Executor
) -> None:
    with pytest.raises(ValueError, match="no levels \\[42\\]"):
        seed_rollouts(sqlite_db, executor, env, HARNESS, model_version="m", seconds=1, levels=[42])
    with pytest.raises(ValueError, match="seconds must be 0 or more"):
        seed_rollouts(sqlite_db, executor, env, HARNESS, model_version="m", seconds=-1)
    report = seed_rollouts(sqlite_db, executor, env, HARNESS, model_version="m", seconds=0)
    assert report.batches == report.attempts == 0
    with sqlite_db.session() as session:
        assert session.scalars(select(Episode)).all() == []


@pytest.mark.slow
def test_seeding_with_the_real_model_records_training_episodes_only(
    local_gateway: LLMGateway, sqlite_db: Database
) -> None:
    env = ArithmeticEnv()
    harness = default_harness("arithmetic").derive(
        step_budget=2, sampling={"samples_per_task": 2, "max_tokens_per_step": 48}
    )
    executor = Executor(local_gateway, {"arithmetic": env})
    report = seed_rollouts(
        sqlite_db, executor, env, harness, model_version="smollm2-135m", seconds=600, levels=[1, 2], max_batches=1
    )
    assert (report.tasks, report.attempts) == (2, 4)
    with sqlite_db.session() as session:
        rows = session.execute(select(Episode, Task).join(Task, Task.id == Episode.task_id)).tuples().all()
        assert len(rows) == 4 and all(task.source == TASK_SOURCE for _, task in rows)
        assert all(episode.outcome in ("passed", "failed") for episode, _ in rows)
        assert sum(episode.outcome == "passed" for episode, _ in rows) == report.passed
        for _, task in rows:
            spec = TaskSpec(environment="arithmetic", difficulty=task.difficulty, prompt=task.prompt)
            assert not is_heldout_task(spec.model_copy(update={"reference": task.reference}), env=env)
        solved = {task.prompt for episode, task in rows if episode.outcome == "passed"}
    assert {example.task for _, example in verified_examples(sqlite_db, "arithmetic")} <= solved
