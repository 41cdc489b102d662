"""SQL records (SQLAlchemy 2 ORM). Schema changes go through Alembic migrations in ``migrations/``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from lamarck.platform.storage.event_order import current_xid


def new_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Timestamped:
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Run(Timestamped, Base):
    """An evolution run: its config, how far it got, and its status."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), default="")
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    generations_done: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Task(Timestamped, Base):
    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), nullable=True, index=True)
    environment: Mapped[str] = mapped_column(String(100), index=True)
    difficulty: Mapped[int] = mapped_column(Integer, default=0)
    prompt: Mapped[str] = mapped_column(Text)
    reference: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    source: Mapped[str] = mapped_column(String(20), default="procedural")
    fingerprint: Mapped[str] = mapped_column(String(64), index=True, default="")
    generation: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ModelVersion(Timestamped, Base):
    __tablename__ = "model_versions"
    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    base: Mapped[str] = mapped_column(String(100))
    adapter_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("model_versions.id"), nullable=True)
    dataset_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    training_metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    eval_scores: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="candidate", index=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    promoted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Harness(Timestamped, Base):
    """An immutable harness version; ``parent_id`` gives the lineage."""

    __tablename__ = "harnesses"
    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    environment: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("harnesses.id"), nullable=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    digest: Mapped[str] = mapped_column(String(64), default="")
    status: Mapped[str] = mapped_column(String(20), default="candidate")
    eval_scores: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)


class Episode(Timestamped, Base):
    """One attempt at a task by one model version under one harness version."""

    __tablename__ = "episodes"
    __table_args__ = (UniqueConstraint("idempotency_key", name="uq_episodes_idempotency_key"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), nullable=True, index=True)
    model_version: Mapped[str] = mapped_column(String(100), index=True)
    harness_version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    skills_used: Mapped[list[Any]] = mapped_column(JSON, default=list)
    lessons_used: Mapped[list[Any]] = mapped_column(JSON, default=list)
    sample_index: Mapped[int] = mapped_column(Integer, default=0)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    outcome: Mapped[str] = mapped_column(String(20), default="pending", index=True)
    reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    wall_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    repaired_from_id: Mapped[str | None] = mapped_column(ForeignKey("episodes.id"), nullable=True)
    generation: Mapped[int | None] = mapped_column(Integer, nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    steps: Mapped[list[Step]] = relationship(
        back_populates="episode", order_by="Step.index", cascade="all, delete-orphan", lazy="selectin"
    )


class Step(Base):
    """One message of a trajectory, stored so that it converts losslessly to a chat message."""

    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("episode_id", "index", name="uq_steps_episode_index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(20))
    content: Mapped[str | None] = mapped_column(Text, nullable=True)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    episode: Mapped[Episode] = relationship(back_populates="steps")


class Verdict(Timestamped, Base):
    __tablename__ = "verdicts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    reward: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(String(20))
    critique: Mapped[str | None] = mapped_column(Text, nullable=True)
    judge_passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    critic_model: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lesson_id: Mapped[str | None] = mapped_column(ForeignKey("lessons.id", ondelete="SET NULL"), nullable=True)
    repaired_episode_id: Mapped[str | None] = mapped_column(ForeignKey("episodes.id"), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Lesson(Timestamped, Base):
    __tablename__ = "lessons"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    text: Mapped[str] = mapped_column(Text)
    environment: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    source_episode_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    times_seen: Mapped[int] = mapped_column(Integer, default=1)
    helpful: Mapped[int] = mapped_column(Integer, default=0)
    harmful: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20), default="active")


class Skill(Timestamped, Base):
    __tablename__ = "skills"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    provenance: Mapped[str] = mapped_column(String(20), default="builtin")
    status: Mapped[str] = mapped_column(String(20), default="active")
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    times_used: Mapped[int] = mapped_column(Integer, default=0)
    times_succeeded: Mapped[int] = mapped_column(Integer, default=0)
    versions: Mapped[list[SkillVersion]] = relationship(
        back_populates="skill", order_by="SkillVersion.version", cascade="all, delete-orphan", lazy="selectin"
    )


class SkillVersion(Timestamped, Base):
    __tablename__ = "skill_versions"
    __table_args__ = (UniqueConstraint("skill_id", "version", name="uq_skill_versions_skill_version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    skill_id: Mapped[str] = mapped_column(ForeignKey("skills.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    signature: Mapped[str] = mapped_column(Text)
    docstring: Mapped[str] = mapped_column(Text, default="")
    code: Mapped[str] = mapped_column(Text)
    tests: Mapped[str] = mapped_column(Text, default="")
    code_digest: Mapped[str] = mapped_column(String(64))
    source_episode_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    package: Mapped[str | None] = mapped_column(String(200), nullable=True)
    skill: Mapped[Skill] = relationship(back_populates="versions")


class Evaluation(Timestamped, Base):
    __tablename__ = "evaluations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(30), default="heldout")
    model_version: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    harness_version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    environment: Mapped[str] = mapped_column(String(100))
    eval_set: Mapped[str] = mapped_column(String(100), default="")
    n_tasks: Mapped[int] = mapped_column(Integer, default=0)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    per_task: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    decision: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class LLMCall(Timestamped, Base):
    """One model call through the gateway. ``episode_id`` and ``step`` say which attempt and which of its replies it
    was (the executor's first step serves all of a task's samples in one call, linked to the first sample's episode);
    ``prompt`` (the messages) and ``response`` (one text per sample) are redacted, and None while text is off;
    ``trace_id`` finds its ``chat`` span in the tracing backend."""

    __tablename__ = "llm_calls"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    role: Mapped[str] = mapped_column(String(30), index=True)
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    episode_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    prompt: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    response: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    trace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)


class CapabilityCell(Base):
    """Beta posterior of verified success for one environment x difficulty."""

    __tablename__ = "capability_cells"
    __table_args__ = (UniqueConstraint("environment", "difficulty", name="uq_capability_env_difficulty"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    environment: Mapped[str] = mapped_column(String(100))
    difficulty: Mapped[int] = mapped_column(Integer)
    alpha: Mapped[float] = mapped_column(Float, default=1.0)
    beta: Mapped[float] = mapped_column(Float, default=1.0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    successes: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class Event(Base):
    """A persisted event. Readers resume after the last id they saw, in ``(xid, id)`` order: ``xid`` is the writing
    transaction, so an id that commits late is still delivered (``event_order``)."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_run_id_id", "run_id", "id"),
        Index("ix_events_xid_id", "xid", "id"),
        Index("ix_events_run_id_xid_id", "run_id", "xid", "id"),
        Index("ix_events_type_id", "type", "id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    xid: Mapped[int] = mapped_column(BigInteger, default=current_xid(), server_default="0")
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    type: Mapped[str] = mapped_column(String(50))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunStepDone(Base):
    """A once-per-generation step of a run that has been applied (its key is the idempotency: a resumed node that
    finds its row skips the step, and the row is written in the transaction that applies it)."""

    __tablename__ = "run_steps_done"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    step: Mapped[str] = mapped_column(String(50), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SkillUse(Base):
    """One counted use of a skill, keyed by what used it (an episode), so counting it again changes nothing."""

    __tablename__ = "skill_uses"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    skill_name: Mapped[str] = mapped_column(String(100))
    success: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiKey(Base):
    """A REST API key: only its SHA-256 is stored (the key is shown once, at creation); ``id`` is the key's public
    part, so a request's key is found without scanning and then compared in constant time."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    key_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class UiSession(Base):
    """A web UI sign-in: the SHA-256 of the cookie's token (never the token), the key it was opened with and when it
    ends (seconds since the epoch), so a restarted server, or any API process, knows it."""

    __tablename__ = "ui_sessions"
    token_digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(32), index=True)
    scopes: Mapped[list[Any]] = mapped_column(JSON, default=list)
    expires_at: Mapped[float] = mapped_column(Float, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiTask(Base):
    """A task handed to the executor through the API (or ``lamarck solve``): the request as given, its status, and
    its result once solved. ``idempotency_key`` with ``request_digest`` makes a retried submission return the first."""

    __tablename__ = "api_tasks"
    __table_args__ = (UniqueConstraint("idempotency_key", name="uq_api_tasks_idempotency_key"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    request: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    request_digest: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    api_key_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Approval(Base):
    """A change the loop proposed that waits for a person: a model or harness promotion, or a skill addition.
    ``details`` holds what applying it needs (a skill's candidate); ``status`` is pending, approved or rejected."""

    __tablename__ = "approvals"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(20))
    subject: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="pending", index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    decision_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
