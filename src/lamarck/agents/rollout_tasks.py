"""The Celery task ``lamarck.rollout.run``: thin, it takes a job's ids and calls ``rollout_jobs.run_rollout`` under
the job's lease with the training tasks' outcome rules (``training.tasks.guarded``). The worker loads this module
(``platform.workers.TASK_MODULES``); the execute node sends jobs by name (``rollout_queue``). A worker process that
consumes the rollout queue warms up once it is forked (``rollout_jobs.warm_for_rollouts``), so the first job of a
generation does not pay for loading the embedder; a worker that only trains loads none of it."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, Task
from celery.signals import worker_process_init

from lamarck.platform.workers import ROLLOUT_QUEUE, app, settings_of
from lamarck.training.tasks import container, guarded

log = logging.getLogger(__name__)

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


def consumes_rollouts(celery: Celery) -> bool:
    """Whether this worker takes rollout jobs: rollouts go to the queue, and the worker consumes it (a worker
    started without ``--queues`` consumes them all)."""
    settings = settings_of(celery)
    if settings.workers.rollouts != "queue" and settings.mode != "distributed":
        return False
    consumed = celery.amqp.queues.consume_from
    return consumed is None or ROLLOUT_QUEUE in consumed


def _warm(**_: Any) -> None:
    if not consumes_rollouts(app):
        return
    from lamarck.agents.rollout_jobs import warm_for_rollouts

    log.info("rollout worker process %d warm in %.1fs", os.getpid(), warm_for_rollouts(container()))


worker_process_init.connect(_warm)
