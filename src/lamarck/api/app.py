"""The REST API's app factory: one FastAPI app over a Container, its routes under ``/v1``."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from lamarck import __version__
from lamarck.api import errors, ui
from lamarck.api.cors import ShapedCORS
from lamarck.api.deps import auth_failure
from lamarck.api.limits import BodyLimit
from lamarck.api.rate_limit import open_rate_limiter
from lamarck.api.routes import approvals as approval_routes
from lamarck.api.routes import catalog, episodes, events, harnesses, health, metrics, models, runs, skills, tasks
from lamarck.api.routes import critic as critic_routes
from lamarck.api.routes import evaluations as evaluation_routes
from lamarck.api.routes import training_jobs as training_job_routes
from lamarck.api.run_launcher import Launcher, process_launcher
from lamarck.api.task_runner import QueuedTaskRunner, TaskRunner
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo

DESCRIPTION = (
    "Lamarck's REST API. Every route but `/v1/health` needs an API key (`lamarck keys create`) sent as "
    "`Authorization: Bearer <key>`; each route names the scope it needs. Every error has one shape: "
    '`{"error": {"code": ..., "message": ...}}`, the message saying what to fix.'
)


def create_app(container: Container, *, runner: TaskRunner | None = None, launcher: Launcher | None = None) -> FastAPI:
    """The app; it owns ``runner`` (by default a pool of ``api.task_workers`` threads, or in distributed mode the
    Celery rollout queue) and its rate limiter (in
    memory, or Redis when distributed: ``rate_limit.open_rate_limiter``) and closes them on exit, but not the
    container, which its creator closes. ``launcher`` starts runs (by default in processes of their own). Raises
    SettingsError (one line) when the rate limits' Redis does not answer."""
    settings = container.settings.api
    rate_limiter = open_rate_limiter(container.settings)  # first: an unreachable Redis fails here, one line
    task_runner = runner or (
        QueuedTaskRunner(container, workers=settings.task_workers)
        if container.settings.mode == "distributed"
        else TaskRunner(container, workers=settings.task_workers)
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if container.settings.mode == "embedded":
            await run_in_threadpool(_fail_orphans, container)
        _freeze_startup_heap()
        yield
        task_runner.shutdown()
        rate_limiter.close()

    app = FastAPI(
        title="Lamarck",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # /docs is served by api.ui from vendored files, under the UI's Content-Security-Policy
        redoc_url=None,
    )
    app.state.container = container
    app.state.runner = task_runner
    app.state.launcher = launcher or process_launcher(container.settings.data_dir / "logs")
    errors.install(app, auth_first=auth_failure)
    app.state.rate_limiter = rate_limiter
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.cors_origins:  # added last, so it answers preflights and marks every response, errors included
        app.add_middleware(
            ShapedCORS,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            expose_headers=["Location", "Retry-After"],
            max_age=600,
        )
    for module in (health, tasks, events, runs, metrics, episodes, models, harnesses, skills, catalog):
        app.include_router(module.router, prefix="/v1")
    app.include_router(approval_routes.router, prefix="/v1")
    app.include_router(critic_routes.router, prefix="/v1")
    app.include_router(evaluation_routes.router, prefix="/v1")
    app.include_router(training_job_routes.router, prefix="/v1")
    ui.install(app)
    return app


def _freeze_startup_heap() -> None:
    """Move everything allocated so far (the imported libraries, the app, the container) out of the garbage
    collector's sight. Each full collection otherwise walks that whole heap while the event loop waits: list
    endpoints paced at 200 requests a second had a p99 of 150-230 ms against a p50 of 2.8 ms, and 4-6 ms with the
    startup heap frozen (``benchmarks/bench_api.py``). Objects made later are collected as before."""
    gc.collect()
    gc.freeze()


def _fail_orphans(container: Container) -> None:
    """Embedded mode runs tasks in this process's threads, so a task still queued or running when it starts lost its
    worker with the last process: it ends failed, and GET says so, instead of staying queued forever."""
    with container.db.session() as session:
        api_repo.fail_unfinished_api_tasks(
            session, reason="the server restarted before this task finished: submit it again"
        )
