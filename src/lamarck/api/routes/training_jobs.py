"""Training jobs: the distillation jobs the loop queued on the ``train`` queue, with their status, attempts, times,
last error and the candidate each produced with the gate's decision on it (``training.jobs``, a read model over the
job log)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.models import MODEL_ID_PATTERN, GateDecisionPublic, ModelStatus, gate_decision
from lamarck.api.routes.paging import Cursor, Limit
from lamarck.api.times import UtcDatetime
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.training.jobs import JobStatus, TrainingJob, training_job, training_jobs

router = APIRouter(
    prefix="/training-jobs",
    tags=["models"],
    responses=documented(*KEYED_ERRORS),
    dependencies=[Depends(known_query_only)],
)

JOB_KEY_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
JobKey = Annotated[str, Path(pattern=JOB_KEY_PATTERN, description="The job's key, e.g. train:<parent>:<digest>.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 422)}
_CURSOR_KIND = "job"


class CandidatePublic(BaseModel):
    id: str
    status: ModelStatus | str
    gate: GateDecisionPublic | None = Field(description="The gate's latest decision on it; null until it is gated.")


class TrainingJobPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "key": "train:smollm2-135m:3f2a9c1e0b7d4a61",
                    "task": "lamarck.train.distill",
                    "parent_version": "smollm2-135m",
                    "dataset_digest": "3f2a9c1e0b7d4a6158e2c0d9b1f7a3e4c5d6b7a8f9e0d1c2b3a4f5e6d7c8b9a0",
                    "rows": 58,
                    "status": "succeeded",
                    "attempts": 1,
                    "queued_at": "2026-01-01T00:00:00Z",
                    "started_at": "2026-01-01T00:00:02Z",
                    "ended_at": "2026-01-01T00:09:41Z",
                    "error": None,
                    "candidate": {
                        "id": "smollm2-135m-ft-3f2a9c1e0b7d",
                        "status": "promoted",
                        "gate": {
                            "champion": "smollm2-135m",
                            "promote": True,
                            "reason": "14 wins, 3 losses",
                            "wins": 14,
                            "losses": 3,
                            "p_value": 0.006,
                            "alpha": 0.05,
                            "look": 1,
                            "environments": [],
                        },
                    },
                }
            ]
        }
    )

    key: str = Field(description="The job's lease key: one parent version, one dataset.")
    task: str = Field(description="The Celery task that runs it, e.g. lamarck.train.distill.")
    parent_version: str | None = Field(description="The model version it trains from, where known.")
    dataset_digest: str | None = Field(
        description="The dataset's digest; only the 16 characters its key carries when no scheduling event named it."
    )
    rows: int | None = Field(description="Training rows in its dataset, where the scheduling event said.")
    status: JobStatus = Field(description="queued (also while waiting to retry), running, succeeded or failed.")
    attempts: int = Field(description="Deliveries that started it, a redelivery after a lost worker included.")
    queued_at: UtcDatetime
    started_at: UtcDatetime | None
    ended_at: UtcDatetime | None
    error: str | None = Field(description="The last error: why it failed, or why it is waiting to retry.")
    candidate: CandidatePublic | None = Field(description="The model version it registered, where it did.")


class TrainingJobPage(BaseModel):
    jobs: list[TrainingJobPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


@router.get(
    "",
    operation_id="listTrainingJobs",
    response_model=TrainingJobPage,
    responses=ERRORS,
    summary="Training jobs, newest first",
)
def list_training_jobs(
    container: ContainerDep,
    _: ReadKey,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    parent_version: Annotated[
        str | None, Query(pattern=MODEL_ID_PATTERN, description="Only jobs that train from this model version.")
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> TrainingJobPage:
    before = _decode_cursor(cursor) if cursor else None
    with container.db.session() as session:
        jobs = [
            job
            for job in training_jobs(session)
            if (status is None or job.status == status)
            and (parent_version is None or job.parent_version == parent_version)
            and (before is None or job.first_event_id < before)
        ]
        page = jobs[:limit]
        return TrainingJobPage(
            jobs=[_public(session, job) for job in page],
            next_cursor=_cursor(page[-1].first_event_id) if len(jobs) > limit else None,
        )


@router.get(
    "/{job}",
    operation_id="getTrainingJob",
    response_model=TrainingJobPublic,
    responses=ERRORS,
    summary="Show a training job",
)
def get_training_job(job: JobKey, container: ContainerDep, _: ReadKey) -> TrainingJobPublic:
    with container.db.session() as session:
        found = training_job(session, job)
        if found is None:
            raise ApiError(404, f"no training job {job!r}: list them with GET /v1/training-jobs")
        return _public(session, found)


def _public(session: Session, job: TrainingJob) -> TrainingJobPublic:
    fields = job.model_dump(exclude={"candidate", "first_event_id"})
    return TrainingJobPublic(**fields, candidate=_candidate(session, job.candidate))


def _candidate(session: Session, version_id: str | None) -> CandidatePublic | None:
    if version_id is None:
        return None
    try:
        version = repo.get_model_version(session, version_id=version_id)
    except repo.NotFound:  # registered, then removed by hand: the job still names it
        return CandidatePublic(id=version_id, status="missing", gate=None)
    scores = dict(version.eval_scores or {})
    gate = gate_decision(scores, api_repo.gate_evaluations(session, version_id=version_id))
    return CandidatePublic(id=version.id, status=version.status, gate=gate)


def _cursor(first_event_id: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([_CURSOR_KIND, first_event_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        kind, position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if kind != _CURSOR_KIND or not isinstance(position, int) or isinstance(position, bool):
            raise ValueError(kind)
        return position
    except (binascii.Error, ValueError, TypeError):
        raise ApiError(422, f"cursor {cursor[:40]!r} is not one this server gave: pass a page's next_cursor") from None
