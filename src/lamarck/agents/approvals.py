"""A person's decision on what the loop proposed while approvals are required (``ApprovalSettings``): approving
applies the change exactly as the loop would have (the model promotion, the harness promotion, the skill addition),
rejecting leaves it refused with the reason on its record. Decision, change and audit event share one transaction,
except a skill's addition, which runs its tests in the sandbox first: one that no longer passes is not added and its
approval stays pending (``NotApplicable``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue
from sqlalchemy.orm import Session

from lamarck.agents.harness_archive import promote_harness
from lamarck.platform.container import Container
from lamarck.platform.storage import approvals
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Approval
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate
from lamarck.training import registry

Decision = Literal["approved", "rejected"]


class NotApplicable(Exception):
    """An approved change that cannot be applied now; the approval stays pending. The message is one line."""


class ApprovalView(BaseModel):
    id: str
    kind: approvals.ApprovalKind
    subject: str = Field(description="The model version, harness id or skill name.")
    status: approvals.ApprovalStatus
    reason: str = Field(description="Why the loop proposed it (the gate's or the harness-critic's reason).")
    details: dict[str, JsonValue] = Field(description="What applying it needs, e.g. a skill's code and tests.")
    decision_reason: str | None
    decided_by: str | None = Field(description="The API key id, or `cli`, that decided.")
    created_at: datetime
    decided_at: datetime | None

    @classmethod
    def of(cls, record: Approval) -> ApprovalView:
        return cls.model_validate(record, from_attributes=True)


def approve(container: Container, approval_id: str, *, reason: str, decided_by: str) -> ApprovalView:
    with container.db.session() as session:
        approval = _pending(session, approval_id)
        kind, subject, details = approval.kind, approval.subject, dict(approval.details or {})
    if kind == "skill":
        _add_skill(container, subject, details)
    with container.db.session() as session:
        approval = _pending(session, approval_id)
        approvals.decide(session, approval, decision="approved", reason=reason, decided_by=decided_by)
        because = f"approved by {decided_by}: {reason} (proposed: {approval.reason})"
        if kind == "model":
            registry.promote(session, version_id=subject, reason=because)
        elif kind == "harness":
            promote_harness(session, harness_id=subject, reason=because)
        return ApprovalView.of(approval)


def reject(container: Container, approval_id: str, *, reason: str, decided_by: str) -> ApprovalView:
    with container.db.session() as session:
        approval = _pending(session, approval_id)
        approvals.decide(session, approval, decision="rejected", reason=reason, decided_by=decided_by)
        note = {"approval": {"id": approval.id, "status": "rejected", "reason": reason, "by": decided_by}}
        if approval.kind == "model":
            registry.record_decision(
                session,
                version_id=approval.subject,
                scores=note,
                reason=f"promotion rejected by {decided_by}: {reason}",
            )
        elif approval.kind == "harness":
            harness = repo.get_harness(session, harness_id=approval.subject)
            harness.status = "rejected"
            harness.eval_scores = {**(harness.eval_scores or {}), **note}
        return ApprovalView.of(approval)


def _pending(session: Session, approval_id: str) -> Approval:
    approval = approvals.get(session, approval_id)
    approvals.check_pending(approval)
    return approval


def _add_skill(container: Container, name: str, details: dict[str, Any]) -> None:
    candidate = SkillCandidate.model_validate(details.get("candidate") or {})
    result = SkillLibrary(container.db, container.sandbox).add(candidate)
    if result.status == "rejected":
        raise NotApplicable(f"skill {name} cannot be added: {result.reason} (reject this approval, or fix and add it)")
