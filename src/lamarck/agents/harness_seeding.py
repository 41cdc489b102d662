"""Rollouts on fresh training tasks, recorded and verified as the loop records them, so that the harness-critic's
bootstrapped-demonstrations source has verified successes to draw from where no run has supplied any.

Tasks come from the curriculum's training source (``training_task``: seeds outside every reserved slice) and each
is checked again by the held-out leak check before it runs; development, gate and report tasks never enter. The
executor's attempts are stored with the loop's ``record_attempts`` and given verdicts by the critic with the
verifier alone (no judge, no repair), so ``verified_examples`` reads them exactly as it reads a run's episodes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview
from lamarck.agents.episodes import record_attempts
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.harness import HarnessSpec
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.heldout import is_heldout_task, training_task
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

TASK_SOURCE = "seeding"


class HeldoutLeak(RuntimeError):
    """A drawn task is a reserved (development, gate or report) task; nothing of it was run or recorded."""


class SeedingReport(BaseModel):
    environment: str
    harness_version: str
    batches: int = 0
    tasks: int = 0
    attempts: int = 0
    passed: int = 0
    passed_by_level: dict[int, int] = Field(default_factory=dict)
    seconds: float = 0.0
    task_ids: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)  # each task's seed, all from the training draw range


def draw_training_tasks(env: Environment, levels: Sequence[int], per_level: int, rng: random.Random) -> list[TaskSpec]:
    """``per_level`` fresh training tasks at each of ``levels``; raises ``HeldoutLeak`` if any is reserved."""
    tasks = [training_task(env, level, rng) for level in levels for _ in range(per_level)]
    for task in tasks:
        if is_heldout_task(task, env=env):
            raise HeldoutLeak(f"{task.source_id} is a reserved {env.name} task; seeding runs training tasks only")
    return tasks


def seed_rollouts(
    db: Database,
    executor: Executor,
    env: Environment,
    harness: HarnessSpec,
    *,
    model_version: str,
    seconds: float,
    per_level: int = 1,
    levels: Sequence[int] | None = None,
    seed: int = 0,
    max_batches: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SeedingReport:
    """Batches of training tasks (``per_level`` at each level) run under ``harness`` until ``seconds`` are spent or
    ``max_batches`` have run; a batch that has started is finished and recorded whole."""
    if seconds < 0:
        raise ValueError(f"seconds must be 0 or more, got {seconds}")
    if per_level < 1:
        raise ValueError(f"per_level must be at least 1, got {per_level}")
    levels = list(env.difficulties if levels is None else levels)
    if unknown := sorted(set(levels) - set(env.difficulties)):
        raise ValueError(f"{env.name} has no levels {unknown}: use some of {list(env.difficulties)}")
    report = SeedingReport(environment=env.name, harness_version=harness.version_id)
    critic = Critic(None, {env.name: env}, db)
    rng = random.Random(f"seeding:{env.name}:{seed}")
    started = clock()
    while levels and clock() - started < seconds and (max_batches is None or report.batches < max_batches):
        tasks = draw_training_tasks(env, levels, per_level, rng)
        attempts = executor.run(
            ExecutorInput(
                tasks=tasks,
                model_version=model_version,
                harnesses={env.name: harness},
                seed=seed * 1_000_003 + report.batches,
            )
        ).attempts
        task_ids = _store_tasks(db, tasks)
        episode_ids = record_attempts(db, attempts, task_ids=task_ids, model_version=model_version)
        reviews = [
            EpisodeForReview(
                episode_id=episode_id,
                task=tasks[attempt.task_index],
                answer=attempt.answer,
                failure_reason=attempt.failure_reason,
                trajectory=attempt.trajectory,
            )
            for attempt, episode_id in zip(attempts, episode_ids, strict=True)
        ]
        verdicts = critic.run(CriticInput(episodes=reviews, judge=False, repair=False)).verdicts
        for review, verdict in zip(reviews, verdicts, strict=True):
            if verdict.passed:
                level = review.task.difficulty
                report.passed_by_level[level] = report.passed_by_level.get(level, 0) + 1
        report.batches += 1
        report.tasks += len(tasks)
        report.attempts += len(attempts)
        report.passed += sum(verdict.passed for verdict in verdicts)
        report.task_ids += task_ids
        report.seeds += [task.seed for task in tasks if task.seed is not None]
    report.seconds = round(clock() - started, 1)
    return report


def _store_tasks(db: Database, tasks: Sequence[TaskSpec]) -> list[str]:
    with db.session() as session:
        return [
            repo.add_task(
                session,
                environment=task.environment,
                difficulty=task.difficulty,
                prompt=task.prompt,
                reference=task.reference,
                meta=task.metadata,
                source=TASK_SOURCE,
            ).id
            for task in tasks
        ]
