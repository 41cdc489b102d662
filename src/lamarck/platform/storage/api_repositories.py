"""Repository functions for what the REST API stores: API keys (hashed) and the tasks handed to the executor, and the
paged run listing. Every function takes the session first and keywords after it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVarTuple

from sqlalchemy import Select, case, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lamarck.platform.storage.records import (
    ApiKey,
    ApiTask,
    Episode,
    Evaluation,
    Harness,
    ModelVersion,
    Run,
    Task,
    UiSession,
    utcnow,
)
from lamarck.platform.storage.repositories import NotFound

_Row = TypeVarTuple("_Row")

TASK_ACTIVE = ("queued", "running")


class IdempotencyConflict(ValueError):
    """An idempotency key already used with another request body."""


# keys


def add_api_key(session: Session, *, key_id: str, key_hash: str, scopes: list[str], name: str = "") -> ApiKey:
    key = ApiKey(id=key_id, key_hash=key_hash, scopes=list(scopes), name=name)
    session.add(key)
    session.flush()
    return key


def find_api_key(session: Session, *, key_id: str) -> ApiKey | None:
    return session.get(ApiKey, key_id)


def add_ui_session(
    session: Session, *, token_digest: str, key_id: str, scopes: list[str], expires_at: float, now: float
) -> None:
    """Opens a session and drops those that have ended, so the table holds only live ones."""
    session.execute(delete(UiSession).where(UiSession.expires_at <= now))
    session.add(UiSession(token_digest=token_digest, key_id=key_id, scopes=scopes, expires_at=expires_at))


def find_ui_session(session: Session, *, token_digest: str, now: float) -> UiSession | None:
    """The live session with this digest; one that has ended is deleted and not returned."""
    found = session.get(UiSession, token_digest)
    if found is not None and found.expires_at <= now:
        session.delete(found)
        return None
    return found


def delete_ui_session(session: Session, *, token_digest: str) -> None:
    session.execute(delete(UiSession).where(UiSession.token_digest == token_digest))


def list_api_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)))


def revoke_api_key(session: Session, *, key_id: str) -> ApiKey:
    key = session.get(ApiKey, key_id)
    if key is None:
        raise NotFound(f"no API key {key_id!r}: list them with `lamarck keys list`")
    if key.revoked_at is None:
        key.revoked_at = utcnow()
    return key


# tasks


def create_api_task(
    session: Session,
    *,
    request: dict[str, Any],
    request_digest: str,
    idempotency_key: str | None = None,
    api_key_id: str | None = None,
) -> tuple[ApiTask, bool]:
    """The new task and True; with an idempotency key already used for the same body, that task and False.

    Raises IdempotencyConflict when the key was used with another body."""
    if idempotency_key is not None:
        existing = _by_idempotency_key(session, idempotency_key)
        if existing is not None:
            return _same_request(existing, request_digest, idempotency_key), False
    task = ApiTask(
        request=request, request_digest=request_digest, idempotency_key=idempotency_key, api_key_id=api_key_id
    )
    try:
        with session.begin_nested():
            session.add(task)
            session.flush()
    except IntegrityError:  # another request with the same key won the race
        assert idempotency_key is not None
        existing = _by_idempotency_key(session, idempotency_key)
        if existing is None:
            raise
        return _same_request(existing, request_digest, idempotency_key), False
    return task, True


def _by_idempotency_key(session: Session, key: str) -> ApiTask | None:
    return session.scalar(select(ApiTask).where(ApiTask.idempotency_key == key))


def _same_request(task: ApiTask, digest: str, key: str) -> ApiTask:
    if task.request_digest != digest:
        raise IdempotencyConflict(
            f"Idempotency-Key {key!r} was already used for task {task.id} with a different body: "
            "send that body again, or use a new key"
        )
    return task


def get_api_task(session: Session, *, task_id: str) -> ApiTask:
    task = session.get(ApiTask, task_id)
    if task is None:
        raise NotFound(f"no task {task_id!r}")
    return task


def start_api_task(session: Session, *, task_id: str) -> bool:
    """Mark a queued task running; False if it is no longer queued (cancelled meanwhile)."""
    result = session.execute(
        update(ApiTask).where(ApiTask.id == task_id, ApiTask.status == "queued").values(status="running")
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def finish_api_task(
    session: Session, *, task_id: str, status: str, result: dict[str, Any] | None = None, error: str | None = None
) -> bool:
    """Record a task's end; False (nothing written) if it was cancelled while it ran."""
    outcome = session.execute(
        update(ApiTask)
        .where(ApiTask.id == task_id, ApiTask.status.in_(TASK_ACTIVE))
        .values(status=status, result=result, error=error, finished_at=utcnow())
    )
    return bool(outcome.rowcount)  # type: ignore[attr-defined]


def fail_unfinished_api_tasks(session: Session, *, reason: str) -> int:
    """End every queued or running task as failed (a server that restarts lost their workers); how many."""
    outcome = session.execute(
        update(ApiTask)
        .where(ApiTask.status.in_(TASK_ACTIVE))
        .values(status="failed", error=reason, finished_at=utcnow())
    )
    return int(outcome.rowcount)  # type: ignore[attr-defined]


def cancel_api_task(session: Session, *, task_id: str) -> ApiTask | None:
    """Cancel a queued or running task; None if it had already ended (the caller reports its status)."""
    task = get_api_task(session, task_id=task_id)
    if not finish_api_task(session, task_id=task_id, status="cancelled", error="cancelled on request"):
        return None
    session.refresh(task)
    return task


# pages: newest first, continued after the (created_at, id) of the previous page's last row


def _newest_first(query: Select[*_Row], record: Any, limit: int, before: tuple[datetime, str] | None) -> Select[*_Row]:
    """``query`` ordered newest first over ``record``'s (created_at, id), limited, and continued after ``before``."""
    query = query.order_by(record.created_at.desc(), record.id.desc()).limit(limit)
    if before is None:
        return query
    created, last_id = before
    return query.where(or_(record.created_at < created, (record.created_at == created) & (record.id < last_id)))


# runs, paged


def runs_page(
    session: Session, *, limit: int, status: str | None = None, before: tuple[datetime, str] | None = None
) -> list[Run]:
    """Runs newest first; ``before`` (created_at, id) of the last run of the previous page continues after it."""
    query = select(Run)
    if status is not None:
        query = query.where(Run.status == status)
    return list(session.scalars(_newest_first(query, Run, limit, before)))


# a run's episodes, paged, and their outcomes grouped for metrics


def run_episodes_page(
    session: Session,
    *,
    run_id: str,
    limit: int,
    outcome: str | None = None,
    environment: str | None = None,
    generation: int | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[tuple[Episode, Task]]:
    """A run's episodes with their tasks, newest first; ``before`` as in ``runs_page``."""
    query = select(Episode, Task).join(Task, Task.id == Episode.task_id).where(Episode.run_id == run_id)
    if outcome is not None:
        query = query.where(Episode.outcome == outcome)
    if environment is not None:
        query = query.where(Task.environment == environment)
    if generation is not None:
        query = query.where(Episode.generation == generation)
    paged = _newest_first(query, Episode, limit, before)
    return [(episode, task) for episode, task in session.execute(paged).tuples()]


@dataclass(frozen=True)
class OutcomeCell:
    """One generation's attempts in one environment at one difficulty."""

    generation: int
    environment: str
    difficulty: int
    attempts: int
    successes: int
    reward_sum: float
    rewarded: int  # attempts with a reward recorded


def run_outcome_cells(session: Session, *, run_id: str) -> list[OutcomeCell]:
    """A run's attempts grouped by generation, environment and difficulty. Repairs the critic wrote are left out:
    they are not attempts the model made."""
    passed = func.sum(case((Episode.outcome == "passed", 1), else_=0))
    query = (
        select(
            Episode.generation,
            Task.environment,
            Task.difficulty,
            func.count(Episode.id),
            passed,
            func.coalesce(func.sum(Episode.reward), 0.0),
            func.count(Episode.reward),
        )
        .join(Task, Task.id == Episode.task_id)
        .where(Episode.run_id == run_id, Episode.generation.is_not(None), Episode.repaired_from_id.is_(None))
        .group_by(Episode.generation, Task.environment, Task.difficulty)
        .order_by(Episode.generation, Task.environment, Task.difficulty)
    )
    return [
        OutcomeCell(int(g), str(env), int(d), int(n), int(ok or 0), float(total), int(rewarded))
        for g, env, d, n, ok, total, rewarded in session.execute(query).tuples()
    ]


# model versions, paged, and their gate evaluations


def model_versions_page(
    session: Session, *, limit: int, status: str | None = None, before: tuple[datetime, str] | None = None
) -> list[ModelVersion]:
    """Model versions newest first; ``before`` as in ``runs_page``."""
    query = select(ModelVersion)
    if status is not None:
        query = query.where(ModelVersion.status == status)
    return list(session.scalars(_newest_first(query, ModelVersion, limit, before)))


def gate_evaluations(session: Session, *, version_id: str) -> list[Evaluation]:
    """The gate's per-environment evaluations of a model version, oldest first."""
    query = (
        select(Evaluation)
        .where(Evaluation.kind == "gate", Evaluation.model_version == version_id)
        .order_by(Evaluation.created_at, Evaluation.id)
    )
    return list(session.scalars(query))


def model_children(session: Session, *, parent_id: str) -> list[ModelVersion]:
    query = select(ModelVersion).where(ModelVersion.parent_id == parent_id)
    return list(session.scalars(query.order_by(ModelVersion.created_at, ModelVersion.id)))


# harnesses, paged


def harnesses_page(
    session: Session,
    *,
    limit: int,
    environment: str | None = None,
    status: str | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[Harness]:
    """Archived harnesses newest first; ``before`` as in ``runs_page``."""
    query = select(Harness)
    if environment is not None:
        query = query.where(Harness.environment == environment)
    if status is not None:
        query = query.where(Harness.status == status)
    return list(session.scalars(_newest_first(query, Harness, limit, before)))


def harness_children(session: Session, *, parent_id: str) -> list[Harness]:
    query = select(Harness).where(Harness.parent_id == parent_id)
    return list(session.scalars(query.order_by(Harness.created_at, Harness.id)))


# evaluations requested through the API: the row is written when asked for, its status kept in ``decision``
# (``queued``, ``running``, ``succeeded``, ``failed``); rows the CLI and the gate wrote whole have none and are done


EVALUATION_ACTIVE = ("queued", "running")


def _evaluation_status() -> Any:
    return Evaluation.decision["status"].as_string()


def create_evaluation_request(
    session: Session,
    *,
    environment: str,
    model_version: str,
    harness_version: str,
    eval_set: str,
    n_tasks: int,
    request: dict[str, Any],
    requested_by: str,
) -> Evaluation:
    """A queued held-out evaluation; it counts as a result only once ``finish_evaluation`` marks it succeeded."""
    evaluation = Evaluation(
        kind="heldout",
        environment=environment,
        model_version=model_version,
        harness_version=harness_version,
        eval_set=eval_set,
        n_tasks=n_tasks,
        score=0.0,
        per_task={},
        decision={"status": "queued", "request": request, "requested_by": requested_by},
    )
    session.add(evaluation)
    session.flush()
    return evaluation


def get_evaluation(session: Session, *, evaluation_id: str) -> Evaluation:
    evaluation = session.get(Evaluation, evaluation_id)
    if evaluation is None:
        raise NotFound(f"no evaluation {evaluation_id}: list them with GET /v1/evaluations")
    return evaluation


def start_evaluation(session: Session, *, evaluation_id: str) -> Evaluation | None:
    """The evaluation, now running; None when it was not queued (already started, finished or failed)."""
    evaluation = session.get(Evaluation, evaluation_id, with_for_update=True)
    if evaluation is None or (evaluation.decision or {}).get("status") != "queued":
        return None
    evaluation.decision = {**evaluation.decision, "status": "running"}
    return evaluation


def finish_evaluation(
    session: Session,
    *,
    evaluation_id: str,
    score: float = 0.0,
    per_task: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """Succeeded with its score, per-task results and ``details`` (samples, per_level, seconds), or failed with
    ``error``."""
    evaluation = get_evaluation(session, evaluation_id=evaluation_id)
    status = "failed" if error is not None else "succeeded"
    evaluation.decision = {**(evaluation.decision or {}), **(details or {}), "status": status, "error": error}
    if error is None:
        evaluation.score = score
        evaluation.per_task = per_task or {}


def fail_unfinished_evaluations(session: Session, *, reason: str) -> int:
    rows = list(session.scalars(select(Evaluation).where(_evaluation_status().in_(EVALUATION_ACTIVE))))
    for evaluation in rows:
        evaluation.decision = {**(evaluation.decision or {}), "status": "failed", "error": reason}
    return len(rows)


def evaluations_page(
    session: Session,
    *,
    limit: int,
    model_version: str | None = None,
    environment: str | None = None,
    kind: str | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[Evaluation]:
    """Evaluations newest first; ``before`` as in ``runs_page``."""
    query = select(Evaluation)
    if model_version is not None:
        query = query.where(Evaluation.model_version == model_version)
    if environment is not None:
        query = query.where(Evaluation.environment == environment)
    if kind is not None:
        query = query.where(Evaluation.kind == kind)
    return list(session.scalars(_newest_first(query, Evaluation, limit, before)))


def model_version_ids(session: Session, *, limit: int) -> list[str]:
    """The newest model versions' ids, to name what exists in an error."""
    query = select(ModelVersion.id).order_by(ModelVersion.created_at.desc(), ModelVersion.id.desc()).limit(limit)
    return list(session.scalars(query))


def harness_ids(session: Session, *, environment: str, limit: int) -> list[str]:
    """The newest archived harnesses' ids of one environment, to name what exists in an error."""
    query = (
        select(Harness.id)
        .where(Harness.environment == environment)
        .order_by(Harness.created_at.desc(), Harness.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))
