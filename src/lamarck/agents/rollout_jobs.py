"""One generation task's rollouts as a job a worker runs (``workers.rollouts = "queue"``): the plain, idempotent
function behind the ``lamarck.rollout.run`` Celery task.

A job names its run, generation and task index, with the model version, harness versions and ladder entry the
execute node chose for it; everything else (the task, the run's config) the worker reads from the database. The job
rolls out all of its task's samples and climbs the hint ladder for that task alone, then records the episodes under
the generation's episode keys (``<run>:g<generation>:t<task>:s<sample>``) together with a ``rollout:t<task>`` step
mark, in one transaction. So a redelivered or retried job finds the mark and records nothing, a worker killed
mid-rollout has recorded nothing and the job runs again elsewhere, and the node knows a task is done even when its
ladder made no attempt at all.

Unlike in-process rollouts, a task's ladder does not see worked examples other tasks of the same generation verified
on the way up: its pool is the verified passes of earlier generations.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from lamarck.agents.demonstrations import recent_demonstrations
from lamarck.agents.episodes import record_attempts
from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.harness import HarnessSpec, load_harness
from lamarck.agents.hint_ladder import run_ladder
from lamarck.agents.runs import derived_seed, episode_key_prefix, load_config, task_id_for
from lamarck.agents.teacher import HintLevel
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import RunStepDone, Task
from lamarck.skills_library.retrieval import SKILLS_COLLECTION

STEP_PREFIX = "rollout:t"


class RolloutError(ValueError):
    """A job that names what does not exist (run, task, harness); retrying cannot help. The message is one line."""


class RolloutJob(BaseModel):
    """What the execute node sends for one task of a generation: ids and the choices it made for them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1)
    generation: int = Field(ge=0)
    task_index: int = Field(ge=0)
    model_version: str = Field(min_length=1)
    harnesses: dict[str, str] = Field(default_factory=dict)  # environment -> harness version id
    entry_rung: int = Field(0, ge=0)  # index into the run's ladder where this task enters (0: the bottom)

    @property
    def step(self) -> str:
        """The step mark recorded with the task's episodes."""
        return f"{STEP_PREFIX}{self.task_index}"

    @property
    def key(self) -> str:
        """The job's lease and idempotency key."""
        return f"rollout:{episode_key_prefix(self.run_id, self.generation)}:t{self.task_index}"


def recorded_tasks(db: Database, run_id: str, generation: int) -> dict[int, list[str]]:
    """Task index -> its episode ids in sample order, for each task of the generation whose rollouts are recorded
    (marked by a job, or recorded in-process: those have episodes but no mark)."""
    prefix = episode_key_prefix(run_id, generation)
    with db.session() as session:
        marks = session.scalars(
            select(RunStepDone.step).where(
                RunStepDone.run_id == run_id,
                RunStepDone.generation == generation,
                RunStepDone.step.like(f"{STEP_PREFIX}%"),
            )
        )
        done: dict[int, list[str]] = {int(step.removeprefix(STEP_PREFIX)): [] for step in marks}
        keyed = repo.episode_ids_by_key_prefix(session, prefix)
    for key, episode_id in sorted(keyed.items(), key=lambda item: _task_and_sample(item[0])):
        done.setdefault(_task_and_sample(key)[0], []).append(episode_id)
    return done


def _task_and_sample(key: str) -> tuple[int, int]:
    task, sample = key.rsplit(":", 2)[-2:]
    return int(task[1:]), int(sample[1:])


def run_rollout(container: Container, job: RolloutJob) -> list[str]:
    """Roll out the job's task and record its episodes once; the episode ids (the recorded ones on a repeat)."""
    db = container.db
    recorded = recorded_tasks(db, job.run_id, job.generation).get(job.task_index)
    if recorded is not None:
        return recorded
    with db.session() as session:
        try:
            config = load_config(repo.get_run(session, run_id=job.run_id))
        except repo.NotFound as exc:
            raise RolloutError(str(exc)) from None
        task = session.get(Task, task_id_for(job.run_id, job.generation, job.task_index))
        if task is None:
            raise RolloutError(
                f"run {job.run_id} has no task {job.task_index} in generation {job.generation}: "
                "jobs are sent only for stored tasks"
            )
        task_id = task.id
        spec = TaskSpec(
            environment=task.environment,
            difficulty=task.difficulty,
            prompt=task.prompt,
            reference=dict(task.reference or {}),
            metadata=dict(task.meta or {}),
        )
    environment = get_environment(spec.environment, sandbox=container.sandbox)
    environments = {spec.environment: environment}
    executor = Executor(
        container.gateway,
        environments,
        skills=container.library,
        lessons=container.lessons,
        max_concurrency=config.concurrency or container.settings.engine.rollout_concurrency,
    )
    request = ExecutorInput(
        tasks=[spec],
        model_version=job.model_version,
        harnesses={spec.environment: _harness(db, environment, job)},
        samples_per_task=config.samples_per_task,
        seed=derived_seed(config.seed, job.generation, f"execute:t{job.task_index}"),
        run_id=job.run_id,
    )
    if config.hints == [HintLevel.NONE]:
        attempts = executor.run(request).attempts
    else:
        attempts = run_ladder(
            executor,
            request,
            environments,
            rungs=config.hints,
            demonstrations=recent_demonstrations(db, [spec.environment]),
            start={0: job.entry_rung} if job.entry_rung else None,
        ).attempts
    return record_attempts(
        db,
        [attempt.model_copy(update={"task_index": job.task_index}) for attempt in attempts],
        task_ids={job.task_index: task_id},
        model_version=job.model_version,
        run_id=job.run_id,
        generation=job.generation,
        key_prefix=episode_key_prefix(job.run_id, job.generation),
        done_step=job.step,
    )


def warm_for_rollouts(container: Container) -> float:
    """Open what every rollout job uses before the first job arrives: the migrated database, the sandbox, the
    gateway, the lesson store and skill library, and the embedder with one embedding (loading MiniLM was 7.8 s of a
    fresh worker's 8.5 s first-job overhead). Returns the seconds it took."""
    started = time.monotonic()
    _ = (container.db, container.sandbox, container.gateway, container.lessons, container.library)  # opened on use
    container.memory.collection(SKILLS_COLLECTION).embed(["warm up"])
    return time.monotonic() - started


def _harness(db: Database, environment: Environment, job: RolloutJob) -> HarnessSpec:
    """The harness version the node chose for the task's environment: its default (never stored) or a stored one."""
    harness_id = job.harnesses.get(environment.name)
    if harness_id is None:
        raise RolloutError(
            f"the job names no harness for {environment.name!r}: the execute node sends one per environment"
        )
    default = default_harness_for(environment)
    if harness_id == default.version_id:
        return default
    with db.session() as session:
        try:
            return load_harness(session, harness_id=harness_id)
        except repo.NotFound as exc:
            raise RolloutError(str(exc)) from None
