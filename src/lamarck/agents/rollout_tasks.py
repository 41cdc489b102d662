"""The Celery task ``lamarck.rollout.run``: thin, it takes a job's ids and calls ``rollout_jobs.run_rollout`` under
the job's lease with the training tasks' outcome rules (``training.tasks.guarded``). The worker loads this module
(``platform.workers.TASK_MODULES``); the execute node sends jobs by name (``rollout_queue``). The rollout code loads
with the first job, so a worker that only trains starts no slower for it."""

from __future__ import annotations

from typing import Any

from celery import Task

from lamarck.platform.workers import app
from lamarck.training.tasks import container, guarded

TASK_NAME = "lamarck.rollout.run"  # rollout_queue.TASK_NAME sends to it


def _run(
    self: Task,
    run_id: str,
    generation: int,
    task_index: int,
    model_version: str,
    harnesses: dict[str, str],
    entry_rung: int = 0,
    failures: int = 0,
) -> dict[str, Any]:
    from lamarck.agents.rollout_jobs import RolloutError, RolloutJob, run_rollout
    from lamarck.curriculum.registry import UnknownEnvironment

    job = RolloutJob(
        run_id=run_id,
        generation=generation,
        task_index=task_index,
        model_version=model_version,
        harnesses=harnesses,
        entry_rung=entry_rung,
    )
    kwargs = {**job.model_dump(mode="json"), "failures": failures}
    return guarded(
        self,
        job.key,
        kwargs,
        lambda _lost: {"episodes": run_rollout(container(), job)},
        bad_input=(RolloutError, UnknownEnvironment),
    )


# Celery is untyped: its decorator is called plainly so that the function it registers keeps its type.
run = app.task(name=TASK_NAME, bind=True, max_retries=None)(_run)
