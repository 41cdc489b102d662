"""Liveness (no key) and what this server serves (any key with ``read``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool

from lamarck import __version__
from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, documented
from lamarck.api.query import known_query_only
from lamarck.api.schemas import Health, Info
from lamarck.curriculum.registry import list_environments
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import DatabaseError

router = APIRouter(tags=["server"], dependencies=[Depends(known_query_only)])


@router.get("/health", operation_id="getHealth", response_model=Health, summary="Is the server up")
async def health(container: ContainerDep) -> Health:
    try:
        await run_in_threadpool(container.db.check)
    except DatabaseError:
        return Health(status="degraded", database="unreachable")
    return Health(status="ok", database="ok")


@router.get(
    "/info",
    operation_id="getInfo",
    response_model=Info,
    responses=documented(*KEYED_ERRORS),
    summary="Version, mode, environments, champion",
)
def info(container: ContainerDep, _: ReadKey) -> Info:
    return _info(container)


def _info(container: Container) -> Info:
    with container.db.session() as session:
        champion = repo.promoted_model_version(session)
        harnesses = repo.promoted_harness_ids(session)
    return Info(
        version=__version__,
        mode=container.settings.mode,
        environments=list_environments(),
        champion=champion.id if champion is not None else None,
        served_harnesses=harnesses,
    )
