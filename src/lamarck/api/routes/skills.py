"""Skills and lessons: the skill library listed (by name, cursor-paged) and shown with code, tests, statistics and
versions, and the lessons the critic kept, searched by meaning. Adding a skill (its tests pass in the sandbox first)
and deprecating one need the ``models`` scope, the one that changes what the agents run with; an addition made by
hand never waits for approval (``ApprovalSettings``: only the loop's own additions wait), as ``lamarck skills add``."""

from __future__ import annotations

import logging
import secrets
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, field_validator

from lamarck.api.deps import ContainerDep, ModelsKey, ReadKey, RunnerDep
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_name_cursor, name_cursor
from lamarck.api.task_runner import TaskRunner
from lamarck.api.text import NUL_MESSAGE, NulFreeBody, given_reason, has_nul
from lamarck.curriculum.registry import list_environments
from lamarck.memory.base import MemoryStoreError, RetrievalQuery
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.skills_library.builtin import builtin_skills
from lamarck.skills_library.library import SkillLibrary, UnknownSkill
from lamarck.skills_library.skill import (
    MAX_NAME,
    SkillCandidate,
    SkillError,
    SkillVersionView,
    SkillView,
    analyse,
    check_tests,
    code_digest,
)

log = logging.getLogger(__name__)

router = APIRouter(tags=["skills"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)])

SkillName = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,200}$", description="The skill's name.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 422)}
WRITE_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}
MAX_SOURCE = 50_000


class SkillSummary(BaseModel):
    name: str
    provenance: str = Field(description="builtin, plugin:<package>, induced or user.")
    status: Literal["active", "deprecated"] | str
    version: int
    signature: str
    description: str
    times_used: int
    times_succeeded: int
    success_rate: float | None


class SkillPage(BaseModel):
    skills: list[SkillSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class SkillDetail(SkillSummary):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "gcd",
                    "provenance": "user",
                    "status": "active",
                    "version": 1,
                    "signature": "(a: int, b: int) -> int",
                    "description": "Greatest common divisor.",
                    "times_used": 4,
                    "times_succeeded": 3,
                    "success_rate": 0.75,
                    "code": "def gcd(a: int, b: int) -> int: ...",
                    "tests": "assert gcd(4, 6) == 2",
                    "source_episode_ids": [],
                    "versions": [],
                }
            ]
        }
    )

    code: str
    tests: str
    source_episode_ids: list[str]
    versions: list[SkillVersionView]


class LessonPublic(BaseModel):
    id: str
    text: str
    environment: str | None
    times_seen: int
    helpful: int
    harmful: int


class LessonHits(BaseModel):
    query: str
    lessons: list[LessonPublic] = Field(description="Closest first within each environment, environments by name.")


def _summary(view: SkillView) -> SkillSummary:
    return SkillSummary(
        **view.model_dump(include=set(SkillSummary.model_fields) - {"success_rate"}), success_rate=view.success_rate
    )


def _library(container: Container) -> SkillLibrary:
    """Reading needs no vector memory, so none is opened (as ``lamarck skills list|show`` do)."""
    return SkillLibrary(container.db, container.sandbox)


@router.get("/skills", operation_id="listSkills", response_model=SkillPage, responses=ERRORS, summary="Skills by name")
def list_skills(
    container: ContainerDep,
    _: ReadKey,
    include_deprecated: Annotated[bool, Query(description="Also the deprecated ones.")] = False,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> SkillPage:
    after = decode_name_cursor(cursor) if cursor else None
    views = [
        v for v in _library(container).list(include_deprecated=include_deprecated) if after is None or v.name > after
    ]
    page = views[:limit]
    return SkillPage(
        skills=[_summary(v) for v in page], next_cursor=name_cursor(page[-1].name) if len(views) > limit else None
    )


@router.get("/skills/{name}", operation_id="getSkill", response_model=SkillDetail, responses=ERRORS, summary="A skill")
def get_skill(name: SkillName, container: ContainerDep, _: ReadKey) -> SkillDetail:
    view = _library(container).get(name)
    if view is None:
        raise ApiError(404, f"no skill {name!r}: list them with GET /v1/skills")
    return _detail(view)


@router.get(
    "/lessons",
    operation_id="searchLessons",
    response_model=LessonHits,
    responses=ERRORS,
    summary="Lessons closest in meaning to a query",
)
def search_lessons(
    container: ContainerDep,
    _: ReadKey,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="What the lessons should be about.")],
    environment: Annotated[
        str | None,
        Query(pattern=r"^[A-Za-z0-9._:-]{1,100}$", description="Only this environment's (default: every one's)."),
    ] = None,
    k: Annotated[int, Query(ge=1, le=50, description="At most this many per environment.")] = 5,
) -> LessonHits:
    if has_nul(q):
        raise ApiError(422, NUL_MESSAGE)
    known = list_environments()
    if environment is not None and environment not in known:
        raise ApiError(422, f"unknown environment {environment!r}: use one of {', '.join(known)}")
    scopes: list[str | None] = [environment] if environment is not None else [None, *sorted(known)]
    try:
        found = container.lessons.retrieve_many([RetrievalQuery(q, env, k) for env in scopes])
    except MemoryStoreError as exc:
        raise ApiError(503, f"the lesson memory is unavailable ({exc}): try again later", code="unavailable") from None
    ids = [hit.id for hits in found for hit in hits]
    with container.db.session() as session:
        rows = repo.lessons_by_ids(session, ids)
        lessons = [
            LessonPublic(
                id=row.id,
                text=row.text,
                environment=row.environment,
                times_seen=row.times_seen,
                helpful=row.helpful,
                harmful=row.harmful,
            )
            for row in (rows.get(i) for i in ids)
            if row is not None
        ]
    return LessonHits(query=q, lessons=lessons)


class SkillCreate(NulFreeBody):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "gcd",
                    "code": "def gcd(a: int, b: int) -> int:\n    while b:\n        a, b = b, a % b\n    return a\n",
                    "tests": "assert gcd(4, 6) == 2\nassert gcd(7, 0) == 7",
                    "description": "Greatest common divisor.",
                }
            ]
        },
    )

    name: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=MAX_NAME, description="The function's name (an identifier)."
    )
    code: str = Field(min_length=1, max_length=MAX_SOURCE, description="The function, with any helpers and imports.")
    tests: str = Field(min_length=1, max_length=MAX_SOURCE, description="Assert-based tests, run in the sandbox.")
    description: str = Field("", max_length=500, description="Shown in listings; default: the docstring's first line.")

    def candidate(self) -> SkillCandidate:
        return SkillCandidate(name=self.name, code=self.code, tests=self.tests, description=self.description.strip())


class DeprecateBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "superseded by gcd_many, which takes a list"}]}
    )

    reason: str = Field(min_length=1, max_length=2000, description="Why: kept with its `skill.deprecated` event.")

    @field_validator("reason")
    @classmethod
    def _text(cls, reason: str) -> str:
        return given_reason(reason, "the deprecation")


def _detail(view: SkillView) -> SkillDetail:
    return SkillDetail(
        **_summary(view).model_dump(),
        code=view.code,
        tests=view.tests,
        source_episode_ids=view.source_episode_ids,
        versions=view.versions,
    )


def _index_later(container: Container, runner: TaskRunner, name: str) -> None:
    """Index the skill as it now is in the background: loading the vector memory's embedding model can take longer
    than a request should wait. SQL is the truth meanwhile (retrieval reads each skill's status there), and a skill
    left unindexed is indexed by the next library that retrieves."""

    def work() -> None:
        try:
            container.library.index(name)
        except MemoryStoreError as exc:
            log.warning("skill %s stored but not indexed: %s", name, exc)

    runner.submit_work(f"skill-index:{name}:{secrets.token_hex(4)}", work)


def _refuse_clash(container: Container, body: SkillCreate) -> None:
    """409 before the sandbox runs: a built-in's name, another provenance's name, or the code already stored."""
    name = body.name
    if any(b.candidate.name == name for b in builtin_skills()):
        raise ApiError(409, f"{name!r} is a built-in skill's name: give the skill another name")
    existing = _library(container).get(name)
    if existing is None:
        return
    if existing.provenance != "user":
        raise ApiError(409, f"name clash: {name!r} already exists with provenance {existing.provenance}: rename it")
    if code_digest(existing.code) == code_digest(body.code):
        raise ApiError(
            409,
            f"skill {name!r} version {existing.version} already has this code ({existing.status}): "
            "change the code to add a new version",
        )


@router.post(
    "/skills",
    operation_id="addSkill",
    status_code=201,
    response_model=SkillDetail,
    responses=WRITE_ERRORS,
    summary="Add a skill (or a new version of one): its tests must pass in the sandbox first",
)
async def add_skill(
    body: SkillCreate, response: Response, container: ContainerDep, runner: RunnerDep, _: ModelsKey
) -> SkillDetail:
    try:
        analyse(body.code, body.name)
        check_tests(body.tests)
    except SkillError as exc:
        raise ApiError(422, f"skill {body.name}: {exc}: fix it and send it again", code="invalid_skill") from None
    await run_in_threadpool(_refuse_clash, container, body)
    result = await run_in_threadpool(_library(container).add, body.candidate())  # the sandbox takes seconds
    if result.status == "unchanged":
        raise ApiError(409, f"skill {body.name!r} was just added with this code: change the code for a new version")
    if result.status == "rejected":
        if result.reason.startswith("cannot verify"):
            raise ApiError(503, f"{result.reason}: try again later", code="unavailable")
        if result.reason.startswith("name clash"):
            raise ApiError(409, f"{result.reason}: rename it")
        why = f"skill {body.name} failed verification: {result.reason}: fix the code or its tests"
        raise ApiError(422, why, code="invalid_skill")
    view = await run_in_threadpool(_library(container).get, body.name)
    if view is None:  # deleted between the write and this read
        raise ApiError(404, f"no skill {body.name!r}: list them with GET /v1/skills")
    _index_later(container, runner, view.name)
    response.headers["Location"] = f"/v1/skills/{view.name}"
    return _detail(view)


@router.post(
    "/skills/{name}/deprecate",
    operation_id="deprecateSkill",
    response_model=SkillDetail,
    responses=WRITE_ERRORS,
    summary="Deprecate a skill: it is no longer offered to the executor (a new version revives it)",
)
def deprecate_skill(
    name: SkillName, body: DeprecateBody, container: ContainerDep, runner: RunnerDep, key: ModelsKey
) -> SkillDetail:
    try:
        view = _library(container).deprecate(name, reason=body.reason, by=key.key_id)
    except UnknownSkill:
        raise ApiError(404, f"no skill {name!r}: list them with GET /v1/skills") from None
    except SkillError as exc:
        raise ApiError(409, str(exc)) from None
    _index_later(container, runner, name)
    return _detail(view)
