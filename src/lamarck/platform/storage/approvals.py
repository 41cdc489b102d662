"""Approvals in SQL: the loop asks (``request``), a person decides (``decide``). Each write appends its audit event
(``approval.requested``, ``approval.decided``) in the same transaction, so the record and the bus never disagree.
Applying an approved change belongs to the part that owns it (``agents.approvals``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.platform.event_types import ApprovalDecided, ApprovalRequested
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.api_repositories import _newest_first
from lamarck.platform.storage.records import Approval

ApprovalKind = Literal["model", "harness", "skill"]
ApprovalStatus = Literal["pending", "approved", "rejected"]
KINDS: tuple[ApprovalKind, ...] = ("model", "harness", "skill")


class AlreadyDecided(Exception):
    """A decision on an approval that is no longer pending; the message is one line."""


def request(
    session: Session,
    *,
    kind: ApprovalKind,
    subject: str,
    reason: str,
    details: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> Approval:
    """A pending approval for ``kind`` ``subject``; the one already pending for it when there is one (a resumed step
    asks again), so a change never waits twice."""
    pending = session.scalar(
        select(Approval).where(Approval.kind == kind, Approval.subject == subject, Approval.status == "pending")
    )
    if pending is not None:
        return pending
    approval = Approval(kind=kind, subject=subject, status="pending", reason=reason, details=details or {})
    session.add(approval)
    session.flush()
    event = ApprovalRequested(approval_id=approval.id, kind=kind, subject=subject, reason=reason)
    repo.append_event(session, type=event.TYPE, payload=event.model_dump(mode="json"), run_id=run_id)
    return approval


def get(session: Session, approval_id: str) -> Approval:
    approval = session.get(Approval, approval_id)
    if approval is None:
        raise repo.NotFound(f"no approval {approval_id}: list them with `lamarck approvals list` or GET /v1/approvals")
    return approval


def check_pending(approval: Approval) -> None:
    if approval.status != "pending":
        why = f" ({approval.decision_reason})" if approval.decision_reason else ""
        raise AlreadyDecided(f"approval {approval.id} was already {approval.status}{why}: a decision is final")


def decide(
    session: Session, approval: Approval, *, decision: Literal["approved", "rejected"], reason: str, decided_by: str
) -> Approval:
    """Record a person's decision on a pending approval, with its audit event."""
    check_pending(approval)
    approval.status = decision
    approval.decision_reason = reason
    approval.decided_by = decided_by
    approval.decided_at = datetime.now(UTC)
    event = ApprovalDecided(
        approval_id=approval.id,
        kind=approval.kind,
        subject=approval.subject,
        decision=decision,
        reason=reason,
        decided_by=decided_by,
    )
    repo.append_event(session, type=event.TYPE, payload=event.model_dump(mode="json"))
    session.flush()
    return approval


def page(
    session: Session,
    *,
    status: ApprovalStatus | None = None,
    kind: ApprovalKind | None = None,
    limit: int = 50,
    before: tuple[datetime, str] | None = None,
) -> list[Approval]:
    """Approvals newest first, filtered, continued after ``before`` (the last row's created_at and id)."""
    query = select(Approval)
    if status is not None:
        query = query.where(Approval.status == status)
    if kind is not None:
        query = query.where(Approval.kind == kind)
    return list(session.scalars(_newest_first(query, Approval, limit, before)))
