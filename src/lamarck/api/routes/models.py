"""Model versions: list (cursor-paged), show with the gate's decision, lineage, and promote and rollback through the
registry functions ``lamarck models promote|rollback`` use."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from sqlalchemy.orm import Session

from lamarck.api.db_work import run_db
from lamarck.api.deps import ContainerDep, ModelsKey, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_cursor, next_cursor
from lamarck.api.text import NUL_MESSAGE, has_nul
from lamarck.api.times import UtcDatetime
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Evaluation, ModelVersion
from lamarck.training import registry

router = APIRouter(
    prefix="/models", tags=["models"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)]
)

MODEL_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,100}$"
ModelStatus = Literal["candidate", "promoted", "retired"]
VersionId = Annotated[str, Path(pattern=MODEL_ID_PATTERN, description="The model version's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 409, 422)}


class ModelPublic(BaseModel):
    id: str
    base: str
    status: ModelStatus | str
    parent_id: str | None
    dataset_digest: str | None
    reason: str | None
    created_at: UtcDatetime
    promoted_at: UtcDatetime | None


class ModelPage(BaseModel):
    models: list[ModelPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class GateEnvironment(BaseModel):
    environment: str
    n: int
    candidate_passes: int
    champion_passes: int
    wins: int = Field(description="Tasks the candidate passed and the champion failed.")
    losses: int = Field(description="Tasks the champion passed and the candidate failed.")
    delta: float
    ok: bool


class GateDecisionPublic(BaseModel):
    champion: str | None
    promote: bool | None
    reason: str | None
    wins: int
    losses: int
    p_value: float | None
    alpha: float | None
    look: int | None
    environments: list[GateEnvironment] = Field(description="Per-environment results, where recorded.")


class ModelDetail(ModelPublic):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "smollm2-135m-ft-3f2a9c1e0b7d",
                    "base": "smollm2-135m",
                    "status": "promoted",
                    "parent_id": "smollm2-135m",
                    "dataset_digest": "3f2a9c1e0b7d",
                    "reason": "gate: 14 wins, 3 losses (p=0.006 < 0.05)",
                    "created_at": "2026-01-01T00:00:00Z",
                    "promoted_at": "2026-01-01T01:00:00Z",
                    "training_metrics": {"loss": 0.41},
                    "previous": "smollm2-135m",
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
                }
            ]
        }
    )

    training_metrics: dict[str, JsonValue]
    previous: str | None = Field(description="The champion this version replaced, which rollback restores.")
    gate: GateDecisionPublic | None = Field(description="The gate's latest decision on it, where it was gated.")


class Lineage(BaseModel):
    id: str
    ancestors: list[ModelPublic] = Field(description="Parent first, then its parent, back to the base.")
    children: list[ModelPublic] = Field(description="Versions trained from this one, oldest first.")


class PromoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"reason": "manual promotion"}]})

    reason: str = Field("manual promotion", min_length=1, max_length=500, description="Why (recorded).")


class ChampionChange(BaseModel):
    champion: str
    previous: str | None


def public(version: ModelVersion) -> ModelPublic:
    return ModelPublic.model_validate(version, from_attributes=True)


@router.get("", operation_id="listModels", response_model=ModelPage, responses=ERRORS, summary="Model versions")
async def list_models(
    container: ContainerDep,
    _: ReadKey,
    status: Annotated[ModelStatus | None, Query(description="Only versions in this status.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ModelPage:
    before = decode_cursor(cursor) if cursor else None
    return await run_db(container.db, _models_page, container, limit=limit, status=status, before=before)


def _models_page(
    container: Container, *, limit: int, status: str | None, before: tuple[datetime, str] | None
) -> ModelPage:
    with container.db.session() as session:
        rows = api_repo.model_versions_page(session, limit=limit + 1, status=status, before=before)
        page = rows[:limit]
        more = len(rows) > limit
        return ModelPage(
            models=[public(v) for v in page],
            next_cursor=next_cursor(page[-1].created_at, page[-1].id) if more else None,
        )


@router.post(
    "/rollback",
    operation_id="rollbackModel",
    response_model=ChampionChange,
    responses=ERRORS,
    summary="Restore the champion the current one replaced",
)
def rollback_model(container: ContainerDep, _: ModelsKey) -> ChampionChange:
    with container.db.session() as session:
        current = repo.promoted_model_version(session)
        try:
            view = registry.rollback(session)
        except registry.RegistryError as exc:
            raise ApiError(409, str(exc)) from None
        return ChampionChange(champion=view.id, previous=current.id if current is not None else None)


@router.get(
    "/{version_id}", operation_id="getModel", response_model=ModelDetail, responses=ERRORS, summary="Show a version"
)
def get_model(version_id: VersionId, container: ContainerDep, _: ReadKey) -> ModelDetail:
    with container.db.session() as session:
        version = repo.get_model_version(session, version_id=version_id)
        scores = dict(version.eval_scores or {})
        previous = scores.get("previous")
        return ModelDetail(
            **public(version).model_dump(),
            training_metrics=dict(version.training_metrics or {}),
            previous=previous if isinstance(previous, str) else None,
            gate=gate_decision(scores, api_repo.gate_evaluations(session, version_id=version_id)),
        )


@router.get(
    "/{version_id}/lineage",
    operation_id="getModelLineage",
    response_model=Lineage,
    responses=ERRORS,
    summary="A version's ancestors and children",
)
def get_lineage(version_id: VersionId, container: ContainerDep, _: ReadKey) -> Lineage:
    with container.db.session() as session:
        version = repo.get_model_version(session, version_id=version_id)
        return Lineage(
            id=version.id,
            ancestors=[public(v) for v in _ancestors(session, version)],
            children=[public(v) for v in api_repo.model_children(session, parent_id=version.id)],
        )


@router.post(
    "/{version_id}/promote",
    operation_id="promoteModel",
    response_model=ChampionChange,
    responses=ERRORS,
    summary="Make a version the champion (the previous one is kept for rollback)",
)
def promote_model(
    version_id: VersionId,
    container: ContainerDep,
    _: ModelsKey,
    body: Annotated[PromoteBody | None, Body()] = None,
) -> ChampionChange:
    reason = (body or PromoteBody()).reason
    if has_nul(reason):
        raise ApiError(422, NUL_MESSAGE)
    with container.db.session() as session:
        current = repo.promoted_model_version(session)
        view = registry.promote(session, version_id=version_id, reason=reason)
        previous = current.id if current is not None and current.id != view.id else view.eval_scores.get("previous")
        return ChampionChange(champion=view.id, previous=previous if isinstance(previous, str) else None)


def _ancestors(session: Session, version: ModelVersion) -> list[ModelVersion]:
    found: list[ModelVersion] = []
    seen = {version.id}
    parent_id = version.parent_id
    while parent_id is not None and parent_id not in seen:  # a cycle in hand-edited records ends the walk
        seen.add(parent_id)
        try:
            parent = repo.get_model_version(session, version_id=parent_id)
        except repo.NotFound:
            break
        found.append(parent)
        parent_id = parent.parent_id
    return found


def gate_decision(scores: dict[str, Any], evaluations: list[Evaluation]) -> GateDecisionPublic | None:
    """The latest decision: its per-environment rows come from the gate's latest evaluation (each holds the whole
    decision), the p-value and look from the version's scores where no evaluation was stored (a refused look).
    Stored JSON is read defensively: a field of an unexpected type is left out rather than failing the request."""
    if not evaluations and "gate" not in scores:
        return None
    latest = evaluations[-1].decision or {} if evaluations else {}
    rows = [row for row in map(_gate_row, latest.get("environments") or []) if row is not None]
    p_value = latest.get("p_value", scores.get("gate_p_value"))
    look = latest.get("look", scores.get("gate_look"))
    champion, promote, reason, alpha = (latest.get(k) for k in ("champion", "promote", "reason", "alpha"))
    return GateDecisionPublic(
        champion=champion if isinstance(champion, str) else None,
        promote=promote if isinstance(promote, bool) else None,
        reason=reason if isinstance(reason, str) else None,
        wins=sum(r.wins for r in rows),
        losses=sum(r.losses for r in rows),
        p_value=_number(p_value),
        alpha=_number(alpha),
        look=look if isinstance(look, int) and not isinstance(look, bool) else None,
        environments=rows,
    )


def _gate_row(stored: object) -> GateEnvironment | None:
    try:
        return GateEnvironment.model_validate(stored)
    except ValidationError:
        return None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
