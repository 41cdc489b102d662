"""Evolution runs: list (filtered, cursor-paged), show, stop, and their generations' summaries."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response

from lamarck.agents.runs import RunConfig, RunError, check_resumable, create_run, request_stop, validate_config
from lamarck.agents.summary import GenerationSummary
from lamarck.api.db_work import run_db
from lamarck.api.deps import ContainerDep, LauncherDep, ReadKey, RunsKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.run_launcher import Launcher, RunAction
from lamarck.api.schemas import GenerationPage, RunCreate, RunPage, RunPublic, RunStatus, RunStopPublic
from lamarck.api.text import ID_PATTERN, valid_id
from lamarck.platform.container import Container
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Run
from lamarck.platform.storage.repositories import NotFound

router = APIRouter(
    prefix="/runs", tags=["runs"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)]
)

RunId = Annotated[str, Path(pattern=ID_PATTERN, description="The run's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 409, 422)}


def public(run: Run) -> RunPublic:
    return RunPublic.model_validate(run, from_attributes=True)


def encode_cursor(run: Run) -> str:
    raw = json.dumps([run.created_at.isoformat(), run.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, run_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not valid_id(str(run_id)):
            raise ValueError(run_id)
        return datetime.fromisoformat(created), str(run_id)
    except (binascii.Error, ValueError, TypeError):
        raise ApiError(422, f"cursor {cursor[:40]!r} is not one this server gave: pass a page's next_cursor") from None


@router.get("", operation_id="listRuns", response_model=RunPage, responses=ERRORS, summary="Runs, newest first")
async def list_runs(
    container: ContainerDep,
    _: ReadKey,
    status: Annotated[RunStatus | None, Query(description="Only runs in this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500, description="A previous page's next_cursor.")] = None,
) -> RunPage:
    before = decode_cursor(cursor) if cursor else None
    return await run_db(container.db, _runs_page, container, limit=limit, status=status, before=before)


def _runs_page(container: Container, *, limit: int, status: str | None, before: tuple[datetime, str] | None) -> RunPage:
    with container.db.session() as session:
        runs = api_repo.runs_page(session, limit=limit + 1, status=status, before=before)
        page = runs[:limit]
        return RunPage(
            runs=[public(r) for r in page], next_cursor=encode_cursor(page[-1]) if len(runs) > limit else None
        )


@router.get("/{run_id}", operation_id="getRun", response_model=RunPublic, responses=ERRORS, summary="Show a run")
def get_run(run_id: RunId, container: ContainerDep, _: ReadKey) -> RunPublic:
    return _show(container, run_id)


def _show(container: Container, run_id: str) -> RunPublic:
    with container.db.session() as session:
        return public(repo.get_run(session, run_id=run_id))


@router.post(
    "/{run_id}/stop",
    operation_id="stopRun",
    response_model=RunStopPublic,
    responses=ERRORS,
    summary="Ask a run to stop at its next node boundary",
)
def stop_run(run_id: RunId, container: ContainerDep, _: RunsKey) -> RunStopPublic:
    status = request_stop(container.db, run_id)
    return RunStopPublic(id=run_id, status="stopped" if status == "stopped" else "stopping")


@router.get(
    "/{run_id}/generations",
    operation_id="listRunGenerations",
    response_model=GenerationPage,
    responses=ERRORS,
    summary="Each finished generation's summary",
)
def list_generations(run_id: RunId, container: ContainerDep, _: ReadKey) -> GenerationPage:
    with container.db.session() as session:
        run = repo.get_run(session, run_id=run_id)
        stored = (run.summary or {}).get("generations", {})
    generations = [GenerationSummary.model_validate(stored[key]) for key in sorted(stored, key=int)]
    return GenerationPage(run_id=run_id, generations=generations)


@router.post(
    "",
    operation_id="createRun",
    status_code=202,
    response_model=RunPublic,
    responses=ERRORS,
    summary="Start an evolution run in a process of its own",
)
def start_run(
    body: RunCreate, response: Response, container: ContainerDep, launcher: LauncherDep, _: RunsKey
) -> RunPublic:
    config = _with_release(container, body.config)
    try:
        validate_config(config, container.db, container.gateway)
        if "model_version" in body.config.model_fields_set:
            with container.db.session() as session:
                repo.get_model_version(session, version_id=config.model_version)
    except (RunError, NotFound) as exc:
        raise ApiError(422, str(exc)) from None
    run_id = create_run(container.db, config, name=body.name)
    _launch(container, launcher, run_id, "start")
    response.headers["Location"] = f"/v1/runs/{run_id}"
    return _show(container, run_id)


@router.post(
    "/{run_id}/resume",
    operation_id="resumeRun",
    status_code=202,
    response_model=RunPublic,
    responses=ERRORS,
    summary="Resume a stopped, failed or killed run from its last checkpoint, in a process of its own",
)
def resume_run(
    run_id: RunId, response: Response, container: ContainerDep, launcher: LauncherDep, _: RunsKey
) -> RunPublic:
    with container.db.session() as session:
        pending = check_resumable(session, run_id).status == "pending"
    _launch(container, launcher, run_id, "start" if pending else "resume")  # a run whose process never began
    response.headers["Location"] = f"/v1/runs/{run_id}"
    return _show(container, run_id)


def _with_release(container: Container, config: RunConfig) -> RunConfig:
    """As ``lamarck evolve`` does: without a model version, the run starts from the champion and follows it."""
    if "model_version" in config.model_fields_set:
        return config
    with container.db.session() as session:
        champion = repo.promoted_model_version(session)
    version = champion.id if champion is not None else DEFAULT_MODEL_VERSION
    follow = config.follow_champion if "follow_champion" in config.model_fields_set else True
    return config.model_copy(update={"model_version": version, "follow_champion": follow})


def _launch(container: Container, launcher: Launcher, run_id: str, action: RunAction) -> None:
    try:
        launcher(run_id, action)
    except OSError as exc:
        with container.db.session() as session:
            repo.set_run_status(session, run_id=run_id, status="failed", error=f"could not start its process: {exc}")
        raise ApiError(503, f"could not start a process for run {run_id}: {exc}", code="unavailable") from None
