"""Harness versions: the archive (cursor-paged), one version, its lineage, the diff between two, and promote and
rollback (scope ``models``) through the functions ``lamarck harness`` uses."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlalchemy.orm import Session

from lamarck.agents.harness_archive import (
    archive_ratings,
    diff,
    judge_flags,
    load_pair,
    promote_harness,
    rollback_harness,
)
from lamarck.agents.harness_rating import REFERENCE_RATING, win_probability
from lamarck.api.deps import ContainerDep, ModelsKey, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_cursor, next_cursor
from lamarck.api.text import NUL_MESSAGE, has_nul
from lamarck.api.times import UtcDatetime
from lamarck.curriculum.registry import list_environments
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Harness

router = APIRouter(
    prefix="/harnesses",
    tags=["harnesses"],
    responses=documented(*KEYED_ERRORS),
    dependencies=[Depends(known_query_only)],
)

HarnessStatus = Literal["candidate", "promoted", "retired", "rejected"]
NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,100}$"
HarnessId = Annotated[str, Path(pattern=NAME_PATTERN, description="The harness version's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 409, 422)}


class HarnessPublic(BaseModel):
    id: str
    environment: str | None
    parent_id: str | None
    status: str = Field(description="candidate, promoted, retired or rejected.")
    rating: float = Field(description="Bradley-Terry rating on the Elo scale over every archived round (1500: none).")
    flag: str = Field(description="Why the critic's judge distrusts answers under it, where it does; else empty.")
    created_at: UtcDatetime


class HarnessPage(BaseModel):
    harnesses: list[HarnessPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class HarnessDetail(HarnessPublic):
    rationale: str | None
    scores: dict[str, JsonValue]
    spec: dict[str, JsonValue]


class HarnessLineage(BaseModel):
    id: str
    ancestors: list[HarnessPublic] = Field(description="Parent first, back to the root.")
    children: list[HarnessPublic] = Field(description="Versions derived from this one, oldest first.")


class KnobChange(BaseModel):
    a: JsonValue
    b: JsonValue


class HarnessDiffPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "a": "arithmetic-3f2a9c1e0b7d",
                    "b": "arithmetic-77aa01bb22cc",
                    "knobs": {"sampling.temperature": {"a": 0.7, "b": 0.0}},
                    "prompt": [
                        "--- arithmetic-3f2a9c1e0b7d",
                        "+++ arithmetic-77aa01bb22cc",
                        "-Think.",
                        "+Think step by step.",
                    ],
                    "examples": [0, 1],
                    "rating_a": 1500.0,
                    "rating_b": 1540.0,
                    "b_wins": 0.56,
                }
            ]
        }
    )

    a: str
    b: str
    knobs: dict[str, KnobChange] = Field(description="Changed knobs by dotted name, prompt and examples apart.")
    prompt: list[str] = Field(description="The system prompts' unified diff, one line per item.")
    examples: tuple[int, int] = Field(description="Worked examples shown by a and by b.")
    rating_a: float
    rating_b: float
    b_wins: float = Field(description="The chance b beats a on a task where they disagree.")


class PromoteHarness(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"reason": "promoted by hand"}]})

    reason: str = Field("promoted by hand", min_length=1, max_length=500)


class RollbackHarness(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"environment": "arithmetic"}]})

    environment: str = Field(min_length=1, max_length=100, description="The environment whose harness to roll back.")


class ServedHarness(BaseModel):
    environment: str
    harness: str = Field(description="The harness the environment is now served with.")


def _public(record: Harness, ratings: dict[str, float], flags: dict[str, str]) -> HarnessPublic:
    return HarnessPublic(
        id=record.id,
        environment=record.environment,
        parent_id=record.parent_id,
        status=record.status,
        rating=ratings.get(record.id, REFERENCE_RATING),
        flag=flags.get(record.id, ""),
        created_at=record.created_at,
    )


def _known_environment(name: str) -> None:
    known = list_environments()
    if name not in known:
        raise ApiError(422, f"unknown environment {name!r}: use one of {', '.join(known)}", code="unknown_environment")


@router.get("", operation_id="listHarnesses", response_model=HarnessPage, responses=ERRORS, summary="The archive")
def list_harnesses(
    container: ContainerDep,
    _: ReadKey,
    environment: Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only this environment's.")] = None,
    status: Annotated[HarnessStatus | None, Query(description="Only harnesses in this status.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> HarnessPage:
    before = decode_cursor(cursor) if cursor else None
    with container.db.session() as session:
        rows = api_repo.harnesses_page(session, limit=limit + 1, environment=environment, status=status, before=before)
        page = rows[:limit]
        ratings, flags = archive_ratings(session, environment), judge_flags(session)
        return HarnessPage(
            harnesses=[_public(r, ratings, flags) for r in page],
            next_cursor=next_cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None,
        )


@router.get(
    "/diff",
    operation_id="diffHarnesses",
    response_model=HarnessDiffPublic,
    responses=ERRORS,
    summary="What changed from a to b: the prompt's diff and the knobs",
)
def diff_harnesses(
    container: ContainerDep,
    _: ReadKey,
    a: Annotated[str, Query(pattern=NAME_PATTERN, description="The first harness's id.")],
    b: Annotated[str, Query(pattern=NAME_PATTERN, description="The second harness's id.")],
) -> HarnessDiffPublic:
    with container.db.session() as session:
        pair = load_pair(session, a, b)
        ratings = archive_ratings(session, pair[0].environment)
    change = diff(*pair)
    rating_a, rating_b = ratings.get(a, REFERENCE_RATING), ratings.get(b, REFERENCE_RATING)
    return HarnessDiffPublic(
        a=a,
        b=b,
        knobs={name: KnobChange(a=left, b=right) for name, (left, right) in change.knobs.items()},
        prompt=change.prompt,
        examples=change.examples,
        rating_a=rating_a,
        rating_b=rating_b,
        b_wins=win_probability(rating_b, rating_a),
    )


@router.post(
    "/rollback",
    operation_id="rollbackHarness",
    response_model=ServedHarness,
    responses=ERRORS,
    summary="Restore the harness an environment's current one replaced",
)
def rollback(body: RollbackHarness, container: ContainerDep, _: ModelsKey) -> ServedHarness:
    _known_environment(body.environment)
    with container.db.session() as session:
        try:
            restored = rollback_harness(session, body.environment)
        except repo.NotFound as exc:
            raise ApiError(409, f"{exc}: nothing to roll back") from None
    return ServedHarness(environment=body.environment, harness=restored)


@router.get(
    "/{harness_id}", operation_id="getHarness", response_model=HarnessDetail, responses=ERRORS, summary="A harness"
)
def get_harness(harness_id: HarnessId, container: ContainerDep, _: ReadKey) -> HarnessDetail:
    with container.db.session() as session:
        record = repo.get_harness(session, harness_id=harness_id)
        ratings, flags = archive_ratings(session, record.environment), judge_flags(session)
        return HarnessDetail(
            **_public(record, ratings, flags).model_dump(),
            rationale=record.rationale,
            scores=dict(record.eval_scores or {}),
            spec=dict(record.spec or {}),
        )


@router.get(
    "/{harness_id}/lineage",
    operation_id="getHarnessLineage",
    response_model=HarnessLineage,
    responses=ERRORS,
    summary="A harness's ancestors and children",
)
def get_lineage(harness_id: HarnessId, container: ContainerDep, _: ReadKey) -> HarnessLineage:
    with container.db.session() as session:
        record = repo.get_harness(session, harness_id=harness_id)
        ratings, flags = archive_ratings(session, record.environment), judge_flags(session)
        return HarnessLineage(
            id=record.id,
            ancestors=[_public(r, ratings, flags) for r in _ancestors(session, record)],
            children=[_public(r, ratings, flags) for r in api_repo.harness_children(session, parent_id=record.id)],
        )


@router.post(
    "/{harness_id}/promote",
    operation_id="promoteHarness",
    response_model=ServedHarness,
    responses=ERRORS,
    summary="Serve its environment with this harness (the one it replaces is kept for rollback)",
)
def promote(
    harness_id: HarnessId, container: ContainerDep, _: ModelsKey, body: PromoteHarness | None = None
) -> ServedHarness:
    reason = (body or PromoteHarness()).reason
    if has_nul(reason):
        raise ApiError(422, NUL_MESSAGE)
    with container.db.session() as session:
        environment = repo.get_harness(session, harness_id=harness_id).environment
        if environment is None:
            raise ApiError(409, f"{harness_id} belongs to no environment: promote an environment's harness")
        promote_harness(session, harness_id=harness_id, reason=reason)
    return ServedHarness(environment=environment, harness=harness_id)


def _ancestors(session: Session, record: Harness) -> list[Harness]:
    found: list[Harness] = []
    seen = {record.id}
    parent_id = record.parent_id
    while parent_id is not None and parent_id not in seen:
        seen.add(parent_id)
        try:
            parent = repo.get_harness(session, harness_id=parent_id)
        except repo.NotFound:
            break
        found.append(parent)
        parent_id = parent.parent_id
    return found
