"""The Celery task ``lamarck.rollout.api_task``: a task submitted to the REST API in distributed mode, solved by a
worker that consumes the ``rollout`` queue (thin: it takes the task's id and calls ``task_runner.run_task``, which
starts only a task still queued, so a second delivery or a cancelled task does nothing). The worker loads this module
(``platform.workers.TASK_MODULES``); ``task_runner.QueuedTaskRunner`` sends to it by name."""

from __future__ import annotations

from lamarck.platform.workers import app
from lamarck.training.tasks import container

TASK_NAME = "lamarck.rollout.api_task"  # routed to the rollout queue by its prefix (platform.workers)


def _solve(task_id: str) -> None:
    from lamarck.api.task_runner import run_task

    run_task(container(), task_id)


# Celery is untyped: its decorator is called plainly so that the function it registers keeps its type.
solve = app.task(name=TASK_NAME)(_solve)
