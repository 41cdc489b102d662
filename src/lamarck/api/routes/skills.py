"""Skills and lessons: the skill library listed (by name, cursor-paged) and shown with code, tests, statistics and
versions, and the lessons the critic kept, searched by meaning."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_name_cursor, name_cursor
from lamarck.api.text import NUL_MESSAGE, has_nul
from lamarck.curriculum.registry import list_environments
from lamarck.memory.base import MemoryStoreError, RetrievalQuery
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillVersionView, SkillView

router = APIRouter(tags=["skills"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)])

SkillName = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,200}$", description="The skill's name.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 422)}


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
    return SkillDetail(
        **_summary(view).model_dump(),
        code=view.code,
        tests=view.tests,
        source_episode_ids=view.source_episode_ids,
        versions=view.versions,
    )


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
