"""Human in the loop over HTTP: the changes the loop proposed while ``approvals.required`` is on (model promotions,
harness promotions, skill additions), listed under ``read`` and decided under ``models`` — the scope that already
promotes and rolls back by hand, so approving gives a key no power it did not have. Every decision is final and is
an ``approval.decided`` event on the bus."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

from lamarck.agents import approvals as decisions
from lamarck.agents.approvals import ApprovalView
from lamarck.api.deps import ContainerDep, ModelsKey, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_cursor, next_cursor
from lamarck.api.text import ID_PATTERN, given_reason
from lamarck.api.times import UtcDatetime
from lamarck.platform.storage import approvals
from lamarck.platform.storage.approvals import ApprovalKind, ApprovalStatus

router = APIRouter(
    prefix="/approvals",
    tags=["approvals"],
    responses=documented(*KEYED_ERRORS),
    dependencies=[Depends(known_query_only)],
)

ApprovalId = Annotated[str, Path(pattern=ID_PATTERN, description="The approval's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 409, 422)}


class ApprovalPublic(ApprovalView):
    created_at: UtcDatetime
    decided_at: UtcDatetime | None

    @classmethod
    def of_view(cls, view: ApprovalView) -> ApprovalPublic:
        return cls.model_validate(view.model_dump())


class ApprovalPage(BaseModel):
    approvals: list[ApprovalPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class DecisionBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "checked the gate's per-environment rows"}]}
    )

    reason: str = Field(min_length=1, max_length=2000, description="Why: kept with the decision and its audit event.")

    @field_validator("reason")
    @classmethod
    def _text(cls, reason: str) -> str:
        return given_reason(reason, "the decision")


@router.get(
    "", operation_id="listApprovals", response_model=ApprovalPage, responses=ERRORS, summary="Approvals, newest first"
)
def list_approvals(
    container: ContainerDep,
    _: ReadKey,
    status: Annotated[ApprovalStatus | None, Query(description="Only approvals in this status.")] = None,
    kind: Annotated[ApprovalKind | None, Query(description="Only approvals of this kind.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ApprovalPage:
    before = decode_cursor(cursor) if cursor else None
    with container.db.session() as session:
        rows = approvals.page(session, status=status, kind=kind, limit=limit + 1, before=before)
        page = rows[:limit]
        return ApprovalPage(
            approvals=[ApprovalPublic.of_view(ApprovalView.of(row)) for row in page],
            next_cursor=next_cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None,
        )


@router.get(
    "/{approval_id}", operation_id="getApproval", response_model=ApprovalPublic, responses=ERRORS, summary="An approval"
)
def get_approval(approval_id: ApprovalId, container: ContainerDep, _: ReadKey) -> ApprovalPublic:
    with container.db.session() as session:
        return ApprovalPublic.of_view(ApprovalView.of(approvals.get(session, approval_id)))


@router.post(
    "/{approval_id}/approve",
    operation_id="approveApproval",
    response_model=ApprovalPublic,
    responses=ERRORS,
    summary="Approve: the promotion or skill addition is applied as the loop would have",
)
def approve(approval_id: ApprovalId, body: DecisionBody, container: ContainerDep, key: ModelsKey) -> ApprovalPublic:
    try:
        view = decisions.approve(container, approval_id, reason=body.reason, decided_by=key.key_id)
    except (approvals.AlreadyDecided, decisions.NotApplicable) as exc:
        raise ApiError(409, str(exc)) from None
    return ApprovalPublic.of_view(view)


@router.post(
    "/{approval_id}/reject",
    operation_id="rejectApproval",
    response_model=ApprovalPublic,
    responses=ERRORS,
    summary="Reject: the change stays refused, with the reason on its record",
)
def reject(approval_id: ApprovalId, body: DecisionBody, container: ContainerDep, key: ModelsKey) -> ApprovalPublic:
    try:
        view = decisions.reject(container, approval_id, reason=body.reason, decided_by=key.key_id)
    except approvals.AlreadyDecided as exc:
        raise ApiError(409, str(exc)) from None
    return ApprovalPublic.of_view(view)
