"""Runs submitted tasks off the event loop and records each one's end: in a bounded thread pool of the API process
(embedded mode, ``TaskRunner``), or on the Celery ``rollout`` queue for any worker (distributed mode,
``QueuedTaskRunner``; the worker side is ``api.task_queue``). Both solve a task with ``run_task``.

A task's row is the truth: the pool only holds futures so that a waiting request can be woken and a queued task
cancelled before it starts. ``run_task`` starts only a task still queued, so a cancelled task, or a second delivery
of one already taken, does nothing; a task cancelled while it runs finishes its work, but its result is not written.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from lamarck.api.db_work import run_db
from lamarck.api.errors import ApiError
from lamarck.api.solving import TaskError, TaskRequest, resolve, solve
from lamarck.platform.container import Container
from lamarck.platform.settings import Settings
from lamarck.platform.storage import api_repositories as api_repo

log = logging.getLogger(__name__)


class TaskRunner:
    def __init__(self, container: Container, *, workers: int) -> None:
        self.container = container
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lamarck-task")
        self._futures: dict[str, Future[None]] = {}
        self._lock = threading.Lock()

    def submit(self, task_id: str) -> None:
        self.submit_work(task_id, lambda: run_task(self.container, task_id))

    def submit_work(self, key: str, work: Callable[[], None]) -> Future[None]:
        """Run ``work`` in the same bounded pool as the tasks (an evaluation, say), once per ``key`` at a time; its
        own record is its truth, as a task's row is."""
        with self._lock:
            future = self._futures.get(key)
            if future is None:
                future = self._pool.submit(work)
                self._futures[key] = future
                future.add_done_callback(lambda _: self._forget(key))
            return future

    def future(self, task_id: str) -> Future[None] | None:
        with self._lock:
            return self._futures.get(task_id)

    def cancel(self, task_id: str) -> None:
        future = self.future(task_id)
        if future is not None:
            future.cancel()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _forget(self, task_id: str) -> None:
        with self._lock:
            self._futures.pop(task_id, None)

    async def settle(self, task_id: str, seconds: float) -> None:
        """Return once the task has ended or ``seconds`` have passed (it goes on either way)."""
        future = self.future(task_id)
        if future is not None:
            await asyncio.wait([asyncio.wrap_future(future)], timeout=seconds)  # neither raises nor cancels it


POLL_SECONDS = 0.1


class QueuedTaskRunner(TaskRunner):
    """Distributed mode: each task is a job on the broker's ``rollout`` queue, solved by whichever worker takes it,
    so the API process serves requests and the workers' engines do the solving. Evaluations (``submit_work``) still
    run in this process's pool."""

    def __init__(self, container: Container, *, workers: int, send: Callable[[str], None] | None = None) -> None:
        super().__init__(container, workers=workers)
        self._send = send or celery_task_sender(container.settings)

    def submit(self, task_id: str) -> None:
        """Queue the task; a broker that cannot take it fails the task's row with the reason (503 to the caller)."""
        try:
            self._send(task_id)
        except Exception as exc:  # kombu's connection errors vary by transport; each ends the same way
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            message = f"the task could not be queued for a worker ({reason}): check the broker, then submit it again"
            _finish(self.container, task_id, "failed", error=message)
            raise ApiError(503, message, code="service_unavailable", headers={"Retry-After": "5"}) from exc

    def future(self, task_id: str) -> Future[None] | None:
        return None

    async def settle(self, task_id: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not await run_db(self.container.db, self._active, task_id):
                return
            await asyncio.sleep(POLL_SECONDS)

    def _active(self, task_id: str) -> bool:
        with self.container.db.session() as session:
            return api_repo.get_api_task(session, task_id=task_id).status in api_repo.TASK_ACTIVE


def celery_task_sender(settings: Settings) -> Callable[[str], None]:
    from lamarck.api.task_queue import TASK_NAME
    from lamarck.platform.workers import app, configure

    configure(app, settings)
    return lambda task_id: app.send_task(TASK_NAME, kwargs={"task_id": task_id}).forget()


def run_task(container: Container, task_id: str) -> None:
    """Solve the task ``task_id`` and write its end; a task that is no longer queued is left as it is."""
    db = container.db
    with db.session() as session:
        if not api_repo.start_api_task(session, task_id=task_id):
            return
        request = TaskRequest.model_validate(api_repo.get_api_task(session, task_id=task_id).request)
    try:
        result = solve(container, resolve(container, request))
    except TaskError as exc:  # what existed at submission went away (a harness, a model version)
        _finish(container, task_id, "failed", error=str(exc))
    except Exception as exc:
        log.exception("task %s failed", task_id)
        _finish(container, task_id, "failed", error=f"the task could not be solved: {type(exc).__name__}: {exc}")
    else:
        _finish(container, task_id, "succeeded", result=result.model_dump(mode="json"))


def _finish(
    container: Container,
    task_id: str,
    status: str,
    *,
    result: dict[str, object] | None = None,
    error: str | None = None,
) -> None:
    with container.db.session() as session:
        api_repo.finish_api_task(session, task_id=task_id, status=status, result=result, error=error)
