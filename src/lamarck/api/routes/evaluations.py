"""Held-out evaluations: ask for one (it runs in the task pool; its status and, once done, its score are at the
Location header), list them newest first (those of ``lamarck eval`` and the gate too), and read one with its
per-task results. Asking needs the ``models`` scope: an evaluation spends the model's time, as training does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from lamarck.api import evaluating
from lamarck.api.deps import ContainerDep, ModelsKey, ReadKey, RunnerDep
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.evaluating import NAME_PATTERN, EvaluationCreate, EvaluationInputError
from lamarck.api.keys import Principal
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_cursor, next_cursor
from lamarck.api.task_runner import TaskRunner
from lamarck.api.text import ID_PATTERN
from lamarck.api.times import UtcDatetime
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.records import Evaluation


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Embedded mode runs evaluations in this process's pool, so one still queued or running when the server starts
    lost its worker with the last process: it ends failed, and GET says so, instead of running forever."""
    container: Container = app.state.container
    if container.settings.mode == "embedded":
        await run_in_threadpool(_fail_orphans, container)
    yield


def _fail_orphans(container: Container) -> None:
    with container.db.session() as session:
        api_repo.fail_unfinished_evaluations(
            session, reason="the server restarted before this evaluation finished: ask for it again"
        )


router = APIRouter(
    prefix="/evaluations",
    tags=["evaluations"],
    responses=documented(*KEYED_ERRORS),
    dependencies=[Depends(known_query_only)],
    lifespan=_lifespan,
)

EvaluationId = Annotated[str, Path(pattern=ID_PATTERN, description="The evaluation's id, from its Location header.")]
EvaluationKind = Literal["heldout", "gate", "dev"]
EvaluationStatus = Literal["queued", "running", "succeeded", "failed"]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 413, 422)}


class EvaluationPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2a9c1e0b7d4e5f8a6b1c2d3e4f5a6b",
                    "kind": "heldout",
                    "status": "succeeded",
                    "environment": "arithmetic",
                    "model_version": "smollm2-135m",
                    "harness_version": "arithmetic-3f2a9c1e0b7d",
                    "eval_set": "arithmetic-heldout-v1/pl1@3f2a9c1e0b7d",
                    "n_tasks": 6,
                    "score": 0.5,
                    "per_level": {"1": 1.0, "2": 0.0},
                    "samples": 1,
                    "seconds": 4.2,
                    "error": None,
                    "created_at": "2026-01-01T00:00:00Z",
                }
            ]
        }
    )

    id: str
    kind: EvaluationKind | str = Field(description="heldout (lamarck eval, this API), gate, or dev (the loop's).")
    status: EvaluationStatus
    environment: str
    model_version: str | None
    harness_version: str | None
    eval_set: str = Field(description="The exact task set: name, version, size and digest.")
    n_tasks: int
    score: float | None = Field(description="Mean share of samples passed per task; null until it succeeded.")
    per_level: dict[str, float] = Field(description="Difficulty level -> score, where recorded.")
    samples: int | None
    seconds: float | None
    error: str | None = Field(description="Why it failed, when it did.")
    created_at: UtcDatetime


class EvaluationDetail(EvaluationPublic):
    per_task: dict[str, JsonValue] = Field(
        description="Task key -> share of samples passed (the gate's rows hold candidate and champion maps)."
    )


class EvaluationPage(BaseModel):
    evaluations: list[EvaluationPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


def public(evaluation: Evaluation) -> EvaluationPublic:
    """Stored JSON is read defensively: rows of the CLI and the gate have no status (they were written done), and a
    field of an unexpected type is left out rather than failing the request."""
    decision = dict(evaluation.decision or {})
    status = decision.get("status", "succeeded")
    if status not in ("queued", "running", "succeeded", "failed"):
        status = "succeeded"
    levels = decision.get("per_level")
    samples, seconds, error = decision.get("samples"), decision.get("seconds"), decision.get("error")
    return EvaluationPublic(
        id=evaluation.id,
        kind=evaluation.kind,
        status=status,
        environment=evaluation.environment,
        model_version=evaluation.model_version,
        harness_version=evaluation.harness_version,
        eval_set=evaluation.eval_set,
        n_tasks=evaluation.n_tasks,
        score=evaluation.score if status == "succeeded" else None,
        per_level={
            str(k): float(v)
            for k, v in (levels.items() if isinstance(levels, dict) else ())
            if isinstance(v, int | float) and not isinstance(v, bool)
        },
        samples=samples if isinstance(samples, int) and not isinstance(samples, bool) else None,
        seconds=float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None,
        error=error if isinstance(error, str) else None,
        created_at=evaluation.created_at,
    )


def detail(evaluation: Evaluation) -> EvaluationDetail:
    return EvaluationDetail(**public(evaluation).model_dump(), per_task=dict(evaluation.per_task or {}))


def _location(evaluation_id: str) -> str:
    return f"/v1/evaluations/{evaluation_id}"


def _submit(container: Container, runner: TaskRunner, body: EvaluationCreate, principal: Principal) -> EvaluationDetail:
    try:
        checked = evaluating.check(container, body)  # bad input fails here, before anything is written
    except EvaluationInputError as exc:
        raise ApiError(422, str(exc)) from None
    with container.db.session() as session:
        evaluation = api_repo.create_evaluation_request(
            session,
            environment=checked.environment.name,
            model_version=checked.model_version,
            harness_version=checked.harness.version_id,
            eval_set=checked.eval_set,
            n_tasks=len(checked.tasks),
            request=body.model_dump(mode="json"),
            requested_by=principal.key_id,
        )
        view = detail(evaluation)
    runner.submit_work(f"evaluation:{view.id}", lambda: _run(container, view.id))
    return view


def _run(container: Container, evaluation_id: str) -> None:
    evaluating.run(container, evaluation_id)


@router.post(
    "",
    operation_id="createEvaluation",
    status_code=202,
    response_model=EvaluationDetail,
    responses=ERRORS,
    summary="Evaluate a release on a held-out set; its status and score appear at the Location header",
)
def create_evaluation(
    body: EvaluationCreate, response: Response, container: ContainerDep, runner: RunnerDep, principal: ModelsKey
) -> EvaluationDetail:
    view = _submit(container, runner, body, principal)
    response.headers["Location"] = _location(view.id)
    return view


@router.get(
    "",
    operation_id="listEvaluations",
    response_model=EvaluationPage,
    responses=ERRORS,
    summary="Evaluations, newest first",
)
def list_evaluations(
    container: ContainerDep,
    _: ReadKey,
    model_version: Annotated[
        str | None, Query(pattern=NAME_PATTERN, description="Only evaluations of this model version.")
    ] = None,
    environment: Annotated[
        str | None, Query(pattern=NAME_PATTERN, description="Only evaluations in this environment.")
    ] = None,
    kind: Annotated[EvaluationKind | None, Query(description="Only evaluations of this kind.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> EvaluationPage:
    before = decode_cursor(cursor) if cursor else None
    with container.db.session() as session:
        rows = api_repo.evaluations_page(
            session, limit=limit + 1, model_version=model_version, environment=environment, kind=kind, before=before
        )
        page = rows[:limit]
        return EvaluationPage(
            evaluations=[public(row) for row in page],
            next_cursor=next_cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None,
        )


@router.get(
    "/{evaluation_id}",
    operation_id="getEvaluation",
    response_model=EvaluationDetail,
    responses=ERRORS,
    summary="An evaluation: its status, and once done its score and per-task results",
)
def get_evaluation(evaluation_id: EvaluationId, container: ContainerDep, _: ReadKey) -> EvaluationDetail:
    with container.db.session() as session:
        return detail(api_repo.get_evaluation(session, evaluation_id=evaluation_id))
