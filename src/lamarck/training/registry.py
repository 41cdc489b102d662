"""The model registry: candidates, the champion, promotion and one-call rollback.

Exactly one version is ``promoted`` at a time (the champion the executor route follows). Promoting retires the old
champion but keeps its files and record, and writes its id into the new champion's ``eval_scores["previous"]`` so
``rollback`` restores it in one call. The default base model is the champion until something is promoted.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import ModelVersion

log = logging.getLogger(__name__)


class RegistryError(ValueError):
    """A registry operation that cannot be done; one line that names the fix."""


class DigestAlreadyTrained(RegistryError):
    """This dataset was already trained from this parent."""


class VersionView(BaseModel):
    id: str
    base: str
    status: str
    parent_id: str | None
    adapter_path: str | None
    dataset_digest: str | None
    reason: str | None
    training_metrics: dict[str, Any]
    eval_scores: dict[str, Any]

    @classmethod
    def of(cls, version: ModelVersion) -> VersionView:
        return cls(
            id=version.id,
            base=version.base,
            status=version.status,
            parent_id=version.parent_id,
            adapter_path=version.adapter_path,
            dataset_digest=version.dataset_digest,
            reason=version.reason,
            training_metrics=dict(version.training_metrics or {}),
            eval_scores=dict(version.eval_scores or {}),
        )


def champion(session: Session) -> str:
    """The model version id the executor should use now (read at every episode)."""
    promoted = repo.promoted_model_version(session)
    return promoted.id if promoted is not None else DEFAULT_MODEL_VERSION


def rollout_sampler(session: Session) -> str:
    """The model the teacher rolls out with: the newest candidate trained from the champion that the gate refused
    but that won more development-slice tasks than the champion (``dev_better``), else the champion.

    Expert iteration needs the better sampler: such a candidate finds more passes at the frontier, and its passes
    are re-rendered for the student and trained from the champion like any others. It is never what users, the
    student's evaluations or the gate's baseline get; the champion stays the champion until the gate promotes.
    The choice reads the development slice, never the gate's tasks, which decide promotion only.
    """
    current = champion(session)
    better = [
        v
        for v in repo.list_model_versions(session, status="candidate")
        if v.parent_id == current and (v.eval_scores or {}).get("dev_better") is True
    ]
    return better[-1].id if better else current


def ensure_base_registered(session: Session, name: str = DEFAULT_MODEL_VERSION) -> None:
    """A base model used as a parent needs its record (the champion if nothing else is promoted)."""
    if session.get(ModelVersion, name) is None:
        status = "promoted" if repo.promoted_model_version(session) is None else "retired"
        repo.register_model_version(session, version_id=name, base=name, status=status)


def candidate_id(parent_id: str, dataset_digest: str) -> str:
    """Deterministic, so a redelivered job registers the same version instead of a second one."""
    stem = parent_id.split("-ft-")[0][:60]
    return f"{stem}-ft-{dataset_digest[:12]}"


def trained_from(session: Session, *, parent_id: str, dataset_digest: str) -> ModelVersion | None:
    query = select(ModelVersion).where(
        ModelVersion.parent_id == parent_id, ModelVersion.dataset_digest == dataset_digest
    )
    return session.scalars(query).first()


def ensure_not_trained(session: Session, *, parent_id: str, dataset_digest: str) -> None:
    existing = trained_from(session, parent_id=parent_id, dataset_digest=dataset_digest)
    if existing is not None:
        raise DigestAlreadyTrained(
            f"dataset {dataset_digest[:12]} was already trained from {parent_id} as {existing.id}: nothing to do"
        )


def register_candidate(
    session: Session,
    *,
    version_id: str,
    base: str,
    adapter_path: str | None,
    parent_id: str,
    dataset_digest: str,
    training_metrics: dict[str, Any],
) -> ModelVersion:
    """Register a trained candidate; the same id again returns the existing record (idempotent)."""
    existing = session.get(ModelVersion, version_id)
    if existing is None:
        ensure_not_trained(session, parent_id=parent_id, dataset_digest=dataset_digest)
    return repo.register_model_version(
        session,
        version_id=version_id,
        base=base,
        adapter_path=adapter_path,
        parent_id=parent_id,
        dataset_digest=dataset_digest,
        training_metrics=training_metrics,
        status="candidate",
    )


def promote(session: Session, *, version_id: str, reason: str = "promoted") -> VersionView:
    target = repo.get_model_version(session, version_id=version_id)
    current = repo.promoted_model_version(session)
    if current is not None and current.id == version_id:
        return VersionView.of(target)
    if current is not None:
        repo.set_model_status(session, version_id=current.id, status="retired", reason=f"replaced by {version_id}")
    target.eval_scores = {**(target.eval_scores or {}), "previous": current.id if current is not None else None}
    repo.set_model_status(session, version_id=version_id, status="promoted", reason=reason)
    _retire_other_promoted(session, keep=version_id)
    session.flush()
    log.info("registry: promoted %s (previous champion %s)", version_id, current.id if current else None)
    return VersionView.of(target)


def rollback(session: Session, *, reason: str = "rolled back") -> VersionView:
    """Restore the champion that the current one replaced; the current one goes back to ``candidate``."""
    current = repo.promoted_model_version(session)
    if current is None:
        raise RegistryError("no promoted model version to roll back from: promote one with `lamarck models promote`")
    previous_id = (current.eval_scores or {}).get("previous")
    if not previous_id:
        raise RegistryError(f"{current.id} has no previous champion to roll back to")
    previous = repo.get_model_version(session, version_id=previous_id)
    repo.set_model_status(session, version_id=current.id, status="candidate", reason=f"{reason} (to {previous_id})")
    repo.set_model_status(
        session, version_id=previous.id, status="promoted", reason=f"restored by rollback from {current.id}"
    )
    session.flush()
    log.info("registry: rolled back %s -> %s", current.id, previous.id)
    return VersionView.of(previous)


def show(session: Session, *, version_id: str) -> VersionView:
    return VersionView.of(repo.get_model_version(session, version_id=version_id))


def lineage_environments(session: Session, *, version_id: str) -> list[str]:
    """The environments ``version`` and every ancestor were trained on, nearest first: what a candidate trained from
    it inherits and must not lose."""
    found: list[str] = []
    current: str | None = version_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        version = repo.get_model_version(session, version_id=current)
        found += [name for name in (version.training_metrics or {}).get("environments") or [] if name not in found]
        current = version.parent_id
    return found


def children(session: Session, *, parent_id: str) -> list[ModelVersion]:
    """Every version trained from ``parent_id``, oldest first."""
    query = select(ModelVersion).where(ModelVersion.parent_id == parent_id).order_by(ModelVersion.created_at)
    return list(session.scalars(query))


def gate_looks(session: Session) -> int:
    """How many candidates the gate has judged so far (each decision is one look at the held-out tasks)."""
    return sum(1 for v in repo.list_model_versions(session) if "gate" in (v.eval_scores or {}))


def undecided_candidates(session: Session) -> list[VersionView]:
    """Candidates the evaluation gate has not judged yet, oldest first."""
    versions = repo.list_model_versions(session, status="candidate")
    pending = [v for v in versions if "gate" not in (v.eval_scores or {})]
    return [VersionView.of(v) for v in sorted(pending, key=lambda v: v.created_at)]


def record_decision(session: Session, *, version_id: str, scores: dict[str, Any], reason: str) -> None:
    version = repo.get_model_version(session, version_id=version_id)
    version.eval_scores = {**(version.eval_scores or {}), **scores}
    version.reason = reason


def _retire_other_promoted(session: Session, *, keep: str) -> None:
    for version in repo.list_model_versions(session, status="promoted"):
        if version.id != keep:
            repo.set_model_status(session, version_id=version.id, status="retired", reason=f"replaced by {keep}")
