"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 15:11:06.472643
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "capability_cells",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("environment", sa.String(length=100), nullable=False),
        sa.Column("difficulty", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("beta", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("successes", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("environment", "difficulty", name="uq_capability_env_difficulty"),
    )
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("model_version", sa.String(length=100), nullable=True),
        sa.Column("harness_version", sa.String(length=100), nullable=True),
        sa.Column("environment", sa.String(length=100), nullable=False),
        sa.Column("eval_set", sa.String(length=100), nullable=False),
        sa.Column("n_tasks", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("per_task", sa.JSON(), nullable=False),
        sa.Column("decision", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluations_model_version"), ["model_version"], unique=False)

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("type", sa.String(length=50), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_run_id_id", ["run_id", "id"], unique=False)

    op.create_table(
        "harnesses",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("environment", sa.String(length=100), nullable=True),
        sa.Column("parent_id", sa.String(length=100), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("eval_scores", sa.JSON(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["harnesses.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("harnesses", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_harnesses_environment"), ["environment"], unique=False)

    op.create_table(
        "lessons",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("environment", sa.String(length=100), nullable=True),
        sa.Column("source_episode_ids", sa.JSON(), nullable=False),
        sa.Column("times_seen", sa.Integer(), nullable=False),
        sa.Column("helpful", sa.Integer(), nullable=False),
        sa.Column("harmful", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("lessons", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lessons_environment"), ["environment"], unique=False)

    op.create_table(
        "llm_calls",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("role", sa.String(length=30), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("episode_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("llm_calls", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_llm_calls_role"), ["role"], unique=False)
        batch_op.create_index(batch_op.f("ix_llm_calls_run_id"), ["run_id"], unique=False)

    op.create_table(
        "model_versions",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("base", sa.String(length=100), nullable=False),
        sa.Column("adapter_path", sa.Text(), nullable=True),
        sa.Column("parent_id", sa.String(length=100), nullable=True),
        sa.Column("dataset_digest", sa.String(length=64), nullable=True),
        sa.Column("training_metrics", sa.JSON(), nullable=False),
        sa.Column("eval_scores", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["model_versions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_versions_status"), ["status"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("generations_done", sa.Integer(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "skills",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("provenance", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("times_used", sa.Integer(), nullable=False),
        sa.Column("times_succeeded", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "skill_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("skill_id", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("docstring", sa.Text(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("tests", sa.Text(), nullable=False),
        sa.Column("code_digest", sa.String(length=64), nullable=False),
        sa.Column("source_episode_ids", sa.JSON(), nullable=False),
        sa.Column("package", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["skill_id"], ["skills.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("skill_id", "version", name="uq_skill_versions_skill_version"),
    )
    with op.batch_alter_table("skill_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_skill_versions_skill_id"), ["skill_id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("environment", sa.String(length=100), nullable=False),
        sa.Column("difficulty", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("reference", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_environment"), ["environment"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_fingerprint"), ["fingerprint"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_run_id"), ["run_id"], unique=False)

    op.create_table(
        "episodes",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("model_version", sa.String(length=100), nullable=False),
        sa.Column("harness_version", sa.String(length=100), nullable=True),
        sa.Column("skills_used", sa.JSON(), nullable=False),
        sa.Column("lessons_used", sa.JSON(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("wall_seconds", sa.Float(), nullable=False),
        sa.Column("repaired_from_id", sa.String(length=32), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["repaired_from_id"],
            ["episodes.id"],
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("idempotency_key", name="uq_episodes_idempotency_key"),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_episodes_model_version"), ["model_version"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_outcome"), ["outcome"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_task_id"), ["task_id"], unique=False)

    op.create_table(
        "steps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("episode_id", sa.String(length=32), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_call_id", sa.String(length=100), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["episode_id"], ["episodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("episode_id", "index", name="uq_steps_episode_index"),
    )
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_steps_episode_id"), ["episode_id"], unique=False)

    op.create_table(
        "verdicts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("episode_id", sa.String(length=32), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("critique", sa.Text(), nullable=True),
        sa.Column("judge_passed", sa.Boolean(), nullable=True),
        sa.Column("critic_model", sa.String(length=100), nullable=True),
        sa.Column("lesson_id", sa.String(length=32), nullable=True),
        sa.Column("repaired_episode_id", sa.String(length=32), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["episode_id"], ["episodes.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["lesson_id"], ["lessons.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["repaired_episode_id"],
            ["episodes.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("verdicts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_verdicts_episode_id"), ["episode_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("verdicts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_verdicts_episode_id"))

    op.drop_table("verdicts")
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_steps_episode_id"))

    op.drop_table("steps")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_episodes_task_id"))
        batch_op.drop_index(batch_op.f("ix_episodes_run_id"))
        batch_op.drop_index(batch_op.f("ix_episodes_outcome"))
        batch_op.drop_index(batch_op.f("ix_episodes_model_version"))

    op.drop_table("episodes")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_run_id"))
        batch_op.drop_index(batch_op.f("ix_tasks_fingerprint"))
        batch_op.drop_index(batch_op.f("ix_tasks_environment"))

    op.drop_table("tasks")
    with op.batch_alter_table("skill_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_skill_versions_skill_id"))

    op.drop_table("skill_versions")
    op.drop_table("skills")
    op.drop_table("runs")
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_versions_status"))

    op.drop_table("model_versions")
    with op.batch_alter_table("llm_calls", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_calls_run_id"))
        batch_op.drop_index(batch_op.f("ix_llm_calls_role"))

    op.drop_table("llm_calls")
    with op.batch_alter_table("lessons", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lessons_environment"))

    op.drop_table("lessons")
    with op.batch_alter_table("harnesses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_harnesses_environment"))

    op.drop_table("harnesses")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_run_id_id")

    op.drop_table("events")
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluations_model_version"))

    op.drop_table("evaluations")
    op.drop_table("capability_cells")
