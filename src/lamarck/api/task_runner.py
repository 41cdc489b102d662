"""Runs submitted tasks off the event loop, in a bounded thread pool (embedded mode), and records each one's end.

A task's row is the truth: the pool only holds futures so that a waiting request can be woken and a queued task
cancelled before it starts. A task cancelled while it runs finishes its work, but its result is not written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from lamarck.api.solving import TaskError, TaskRequest, resolve, solve
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo

log = logging.getLogger(__name__)


class TaskRunner:
    def __init__(self, container: Container, *, workers: int) -> None:
        self.container = container
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lamarck-task")
        self._futures: dict[str, Future[None]] = {}
        self._lock = threading.Lock()

    def submit(self, task_id: str) -> Future[None]:
        return self.submit_work(task_id, lambda: self._run(task_id))

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

    def _run(self, task_id: str) -> None:
        db = self.container.db
        with db.session() as session:
            if not api_repo.start_api_task(session, task_id=task_id):
                return
            request = TaskRequest.model_validate(api_repo.get_api_task(session, task_id=task_id).request)
        try:
            result = solve(self.container, resolve(self.container, request))
        except TaskError as exc:  # what existed at submission went away (a harness, a model version)
            self._finish(task_id, "failed", error=str(exc))
        except Exception as exc:
            log.exception("task %s failed", task_id)
            self._finish(task_id, "failed", error=f"the task could not be solved: {type(exc).__name__}: {exc}")
        else:
            self._finish(task_id, "succeeded", result=result.model_dump(mode="json"))

    def _finish(
        self, task_id: str, status: str, *, result: dict[str, object] | None = None, error: str | None = None
    ) -> None:
        with self.container.db.session() as session:
            api_repo.finish_api_task(session, task_id=task_id, status=status, result=result, error=error)
