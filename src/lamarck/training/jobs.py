"""Training jobs as people ask about them: a read model over the event log, which is the job log (``training.tasks``).

A distillation job is named by its lease key (``pipeline.distill_job_key``). Its story is told by events other parts
already publish: ``training.scheduled`` when it is queued, then the guard's ``job.started`` / ``job.retrying`` /
``job.failed`` / ``job.succeeded`` for every delivery. Folding them gives its status, attempts, times, last error and
the candidate it registered, with nothing stored twice and nothing to keep in step: a job queued before this module
existed reads the same as one queued after. Only events of those types are read (by the events' type index), and of
the ``job.*`` ones only the training queue's (``lamarck.train.*``), so rollouts' job events cost nothing here.

Statuses: ``queued`` (scheduled and not started, or waiting for a retry), ``running``, ``succeeded``, ``failed``.
A ``job.deferred`` (another delivery holds the lease) changes nothing: the delivery that holds it tells the story.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from lamarck.platform.event_types import (
    JobFailed,
    JobRetrying,
    JobStarted,
    JobSucceeded,
    TrainingScheduled,
    parse_event,
)
from lamarck.platform.storage.records import Event, ModelVersion
from lamarck.training.pipeline import distill_job_key

JobStatus = Literal["queued", "running", "succeeded", "failed"]
DISTILL_TASK = "lamarck.train.distill"
TRAIN_TASKS = "lamarck.train."
_JOB_TYPES = (JobStarted.TYPE, JobRetrying.TYPE, JobFailed.TYPE, JobSucceeded.TYPE)
_KEY_PREFIX = "train:"
JobEvent = TrainingScheduled | JobStarted | JobRetrying | JobFailed | JobSucceeded


class TrainingJob(BaseModel):
    key: str
    task: str
    parent_version: str | None
    dataset_digest: str | None  # the full digest where known, else the 16 characters the key carries
    rows: int | None  # training rows, from the scheduling event
    status: JobStatus
    attempts: int  # deliveries that started it (a redelivery after a lost worker counts)
    queued_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    error: str | None
    candidate: str | None  # the model version it registered
    first_event_id: int  # the order jobs are listed in (newest first)


class _Folding:
    """One job's events, applied in order."""

    def __init__(self, key: str, task: str, first: Event) -> None:
        self.job = TrainingJob(
            key=key,
            task=task,
            parent_version=None,
            dataset_digest=None,
            rows=None,
            status="queued",
            attempts=0,
            queued_at=first.created_at,
            started_at=None,
            ended_at=None,
            error=None,
            candidate=None,
            first_event_id=first.id,
        )
        parsed = parse_distill_key(key)
        if parsed is not None:
            self.job.parent_version, self.job.dataset_digest = parsed

    def apply(self, event: Event, parsed: JobEvent) -> None:
        job = self.job
        if isinstance(parsed, TrainingScheduled):
            job.parent_version, job.dataset_digest, job.rows = parsed.parent_version, parsed.dataset_digest, parsed.rows
            if job.status == "failed":  # scheduled again after it gave up: a new round of attempts
                job.status, job.ended_at = "queued", None
            return
        job.task = parsed.task
        if isinstance(parsed, JobStarted):
            job.attempts += 1
            job.status, job.ended_at = "running", None
            job.started_at = job.started_at or event.created_at
        elif isinstance(parsed, JobRetrying):
            job.status, job.error = "queued", parsed.error
        elif isinstance(parsed, JobFailed):
            job.status, job.error, job.ended_at = "failed", parsed.error, event.created_at
        elif isinstance(parsed, JobSucceeded):
            job.status, job.error, job.ended_at = "succeeded", None, event.created_at
            job.candidate = _produced(parsed.result) or job.candidate


def parse_distill_key(key: str) -> tuple[str, str] | None:
    """(parent version, digest prefix) of a distillation job's key; None for another kind of key."""
    if not key.startswith(_KEY_PREFIX) or ":" not in key[len(_KEY_PREFIX) :]:
        return None
    parent, digest = key[len(_KEY_PREFIX) :].rsplit(":", 1)
    return (parent, digest) if parent and digest and distill_job_key(parent, digest) == key else None


def _produced(result: Any) -> str | None:
    """The version a job's result names (``version_id`` from a distillation, ``version`` from a rehearsal)."""
    if not isinstance(result, dict):
        return None
    found = result.get("version_id", result.get("version"))
    return found if isinstance(found, str) else None


def fold(events: Iterable[Event]) -> list[TrainingJob]:
    """Jobs from their events (in id order), newest first; an event whose payload does not validate is skipped."""
    jobs: dict[str, _Folding] = {}
    for event in events:
        parsed = parse_event(event.type, event.payload)
        if isinstance(parsed, TrainingScheduled):
            key, task = distill_job_key(parsed.parent_version, parsed.dataset_digest), DISTILL_TASK
        elif isinstance(parsed, JobStarted | JobRetrying | JobFailed | JobSucceeded):
            key, task = parsed.job, parsed.task
        else:
            continue
        folding = jobs.get(key)
        if folding is None:
            folding = jobs[key] = _Folding(key, task, event)
        folding.apply(event, parsed)
    return sorted((f.job for f in jobs.values()), key=lambda j: j.first_event_id, reverse=True)


def training_jobs(session: Session) -> list[TrainingJob]:
    """Every training job, newest first, with the parent and dataset of a candidate it registered filled in where
    its events did not say (a rehearsal)."""
    train_job = and_(Event.type.in_(_JOB_TYPES), Event.payload["task"].as_string().like(f"{TRAIN_TASKS}%"))
    query = select(Event).where(or_(Event.type == TrainingScheduled.TYPE, train_job)).order_by(Event.id)
    jobs = fold(session.scalars(query))
    produced = {job.candidate for job in jobs if job.candidate is not None}
    versions = {v.id: v for v in session.scalars(select(ModelVersion).where(ModelVersion.id.in_(produced)))}
    for job in jobs:
        version = versions.get(job.candidate or "")
        if version is not None:
            job.parent_version = job.parent_version or version.parent_id
            if job.dataset_digest is None or (version.dataset_digest or "").startswith(job.dataset_digest):
                job.dataset_digest = version.dataset_digest or job.dataset_digest
    return jobs


def training_job(session: Session, key: str) -> TrainingJob | None:
    return next((job for job in training_jobs(session) if job.key == key), None)
