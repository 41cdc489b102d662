"""Celery tasks: thin wrappers that take ids, hold the job lease, and call plain functions in ``pipeline``.

``guarded`` gives every job the same outcome rules:
- lease busy (another delivery runs it): retry later, not counted as a failure;
- bad input (no new episodes, a digest already trained, a held-out leak, an adapter that fails to load): recorded
  as ``job.failed`` with a one-line error, no retry;
- anything else: retried with exponential backoff; after ``workers.max_attempts`` the job ends failed and the
  failure is recorded. Outcomes are ``job.*`` events (the event bus is the job log).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.signals import worker_process_init

from lamarck.platform.container import Container
from lamarck.platform.event_types import JobDeferred, JobFailed, JobProgress, JobRetrying, JobStarted, JobSucceeded
from lamarck.platform.events import EventBus
from lamarck.platform.workers import LeaseBusy, LeaseLost, app, lease, settings_of, worker_torch_threads

log = logging.getLogger(__name__)

_containers: dict[int, Container] = {}


def container() -> Container:
    """One container per worker process (created after the fork, never shared across it)."""
    pid = os.getpid()
    if pid not in _containers:
        _containers[pid] = Container(settings_of(app))
    return _containers[pid]


def _limit_threads(**_: Any) -> None:
    threads = worker_torch_threads(settings_of(app))
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
        log.info("worker process %d: torch uses %d thread(s)", os.getpid(), threads)


# Celery is untyped: its decorators are called plainly so that the functions they register keep their types.
worker_process_init.connect(_limit_threads)


def bus() -> EventBus:
    return EventBus(container().db)


def bad_input_errors() -> tuple[type[BaseException], ...]:
    from lamarck.platform.llm.model_store import ModelStoreError
    from lamarck.platform.llm.runner import UnsupportedModelError
    from lamarck.training.registry import RegistryError
    from lamarck.training.traces_to_rows import HeldoutLeak, NoNewEpisodes

    return (NoNewEpisodes, RegistryError, HeldoutLeak, ModelStoreError, UnsupportedModelError)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]


def guarded(
    task: Task,
    key: str,
    kwargs: dict[str, Any],
    body: Callable[[threading.Event], dict[str, Any]],
    bad_input: tuple[type[BaseException], ...] = (),
) -> dict[str, Any]:
    """Run ``body`` under the job's lease with the outcome rules above; ``bad_input`` adds the caller's own errors
    that no retry can fix."""
    settings = settings_of(app)
    failures = int(kwargs.get("failures", 0))
    attempt = failures + 1
    info = {
        "job": key,
        "task": task.name,
        "celery_id": task.request.id,
        "attempt": attempt,
        "redelivered": bool((task.request.delivery_info or {}).get("redelivered")),
    }
    try:
        with lease(settings, key) as lost:
            bus().publish(JobStarted(**info))
            result = body(lost)
            if lost.is_set():
                raise LeaseLost(f"lease on {key} was lost during the job")
    except LeaseBusy:
        countdown = max(1.0, settings.workers.lease_ttl_seconds / 4)
        bus().publish(JobDeferred(**info, reason="lease busy", countdown=countdown))
        log.info("job %s: lease busy; checking again in %.0fs", key, countdown)
        raise task.retry(kwargs=kwargs, countdown=countdown) from None
    except bad_input_errors() + bad_input as exc:
        bus().publish(JobFailed(**info, error=_one_line(exc), final=True, retryable=False))
        log.warning("job %s failed: %s", key, _one_line(exc))
        return {"status": "failed", "error": _one_line(exc)}
    except Exception as exc:
        if attempt >= settings.workers.max_attempts:
            bus().publish(JobFailed(**info, error=_one_line(exc), final=True, retryable=True))
            log.error("job %s failed after %d attempts: %s", key, attempt, _one_line(exc))
            raise
        countdown = min(
            settings.workers.retry_backoff_seconds * 2**failures, settings.workers.retry_backoff_max_seconds
        )
        bus().publish(JobRetrying(**info, error=_one_line(exc), countdown=countdown))
        raise task.retry(kwargs={**kwargs, "failures": attempt}, countdown=countdown, exc=exc) from None
    bus().publish(JobSucceeded(**info, result=result))
    return result


def _distill(self: Task, parent_version: str, dataset_digest: str, failures: int = 0) -> dict[str, Any]:
    from lamarck.training.pipeline import distill_job_key, train_candidate

    kwargs = {"parent_version": parent_version, "dataset_digest": dataset_digest, "failures": failures}
    key = distill_job_key(parent_version, dataset_digest)
    return guarded(
        self,
        key,
        kwargs,
        lambda _lost: train_candidate(
            container(), parent_version=parent_version, dataset_digest=dataset_digest, bus=bus()
        ).model_dump(mode="json"),
    )


def _rehearse(
    self: Task, job: str, steps: int = 5, step_seconds: float = 1.0, fail: bool = False, failures: int = 0
) -> dict[str, Any]:
    """A real job with a cheap body (tests and drills): sleeps in steps, then registers a version idempotently."""
    kwargs = {"job": job, "steps": steps, "step_seconds": step_seconds, "fail": fail, "failures": failures}

    def body(lost: threading.Event) -> dict[str, Any]:
        from lamarck.platform.settings import DEFAULT_MODEL_VERSION
        from lamarck.training import registry

        with container().db.session() as session:
            done = registry.trained_from(session, parent_id=DEFAULT_MODEL_VERSION, dataset_digest=job)
            if done is not None:
                return {"version": done.id, "created": False}
        for step in range(steps):
            if lost.is_set():
                raise LeaseLost(f"lease on {job} lost at step {step}")
            bus().publish(JobProgress(job=f"rehearse:{job}", step=step, pid=os.getpid()))
            time.sleep(step_seconds)
        if fail:
            raise RuntimeError(f"rehearsal job {job} fails on purpose")
        with container().db.session() as session:
            registry.ensure_base_registered(session)
            version = registry.register_candidate(
                session,
                version_id=registry.candidate_id(DEFAULT_MODEL_VERSION, job),
                base=DEFAULT_MODEL_VERSION,
                adapter_path=None,
                parent_id=DEFAULT_MODEL_VERSION,
                dataset_digest=job,
                training_metrics={"rehearsal": True, "pid": os.getpid()},
            )
            return {"version": version.id, "created": True}

    return guarded(self, f"rehearse:{job}", kwargs, body)


def _ping() -> str:
    return "pong"


distill = app.task(name="lamarck.train.distill", bind=True, max_retries=None)(_distill)
rehearse = app.task(name="lamarck.train.rehearse", bind=True, max_retries=None)(_rehearse)
ping = app.task(name="lamarck.rollout.ping")(_ping)


def send(name: str, kwargs: dict[str, Any]) -> Any:
    """Queue a task by name (routing puts ``lamarck.train.*`` on the ``train`` queue, ``lamarck.rollout.*`` on
    ``rollout``; ``lamarck.rollout.run`` lives in ``agents/rollout_tasks.py``)."""
    return app.send_task(name, kwargs=kwargs)
