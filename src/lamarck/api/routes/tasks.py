"""Hand the executor one's own task: submit (idempotently), wait for the answer, read, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from lamarck.api.deps import ContainerDep, ReadKey, RunnerDep, TasksKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.keys import Principal
from lamarck.api.query import known_query_only
from lamarck.api.schemas import TERMINAL_TASK, TaskCreate, TaskPublic, TaskWaitCreate
from lamarck.api.solving import TaskRequest, resolve
from lamarck.api.task_runner import TaskRunner
from lamarck.api.text import ID_PATTERN
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.records import ApiTask

router = APIRouter(
    prefix="/tasks", tags=["tasks"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)]
)

DEFAULT_WAIT_SECONDS = 30.0
TaskId = Annotated[str, Path(pattern=ID_PATTERN, description="The task's id, from its Location header.")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=200,
        description="Retrying with the same key and body returns the first task instead of a new one.",
    ),
]
ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 409, 413, 422)
}


def public(task: ApiTask) -> TaskPublic:
    return TaskPublic.model_validate(task, from_attributes=True)


def _location(task_id: str) -> str:
    return f"/v1/tasks/{task_id}"


def _submit(
    container: Container, runner: TaskRunner, request: TaskRequest, key: str | None, principal: Principal
) -> TaskPublic:
    resolve(container, request)  # bad input fails here, before anything is written
    with container.db.session() as session:
        task, created = api_repo.create_api_task(
            session,
            request=request.model_dump(mode="json"),
            request_digest=request.digest(),
            idempotency_key=key,
            api_key_id=principal.key_id,
        )
        view = public(task)
    if created:
        runner.submit(view.id)
    return view


@router.post(
    "",
    operation_id="createTask",
    status_code=202,
    response_model=TaskPublic,
    responses=ERRORS,
    summary="Submit a task; its result appears at the Location header",
)
def create_task(
    body: TaskCreate,
    response: Response,
    container: ContainerDep,
    runner: RunnerDep,
    principal: TasksKey,
    idempotency_key: IdempotencyKey = None,
) -> TaskPublic:
    view = _submit(container, runner, body, idempotency_key, principal)
    response.headers["Location"] = _location(view.id)
    return view


@router.post(
    "/wait",
    operation_id="solveTask",
    response_model=TaskPublic,
    responses={**ERRORS, 202: {"model": TaskPublic, "description": "Still running after the timeout: see Location."}},
    summary="Submit a task and wait for its answer, up to a timeout",
)
async def solve_task(
    body: TaskWaitCreate,
    response: Response,
    container: ContainerDep,
    runner: RunnerDep,
    principal: TasksKey,
    idempotency_key: IdempotencyKey = None,
    timeout: Annotated[float | None, Query(gt=0, le=600, description="Overrides the body's timeout.")] = None,
) -> TaskPublic:
    view = await run_in_threadpool(_submit, container, runner, body.task(), idempotency_key, principal)
    await runner.settle(view.id, timeout or body.timeout or DEFAULT_WAIT_SECONDS)
    view = await run_in_threadpool(_read, container, view.id)
    if view.status not in TERMINAL_TASK:
        response.status_code = 202
        response.headers["Location"] = _location(view.id)
    return view


def _read(container: Container, task_id: str) -> TaskPublic:
    with container.db.session() as session:
        return public(api_repo.get_api_task(session, task_id=task_id))


@router.get("/{task_id}", operation_id="getTask", response_model=TaskPublic, responses=ERRORS, summary="Read a task")
def get_task(task_id: TaskId, container: ContainerDep, _: ReadKey) -> TaskPublic:
    return _read(container, task_id)


@router.post(
    "/{task_id}/cancel",
    operation_id="cancelTask",
    response_model=TaskPublic,
    responses=ERRORS,
    summary="Cancel a queued or running task (a running one's result is discarded)",
)
def cancel_task(task_id: TaskId, container: ContainerDep, runner: RunnerDep, _: TasksKey) -> TaskPublic:
    with container.db.session() as session:
        task = api_repo.cancel_api_task(session, task_id=task_id)
        if task is None:
            status = api_repo.get_api_task(session, task_id=task_id).status
            raise ApiError(409, f"task {task_id} has already ended ({status}): there is nothing to cancel")
        view = public(task)
    runner.cancel(task_id)
    return view
