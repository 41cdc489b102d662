"""idempotency keys for once-per-generation steps and skill-use counts

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 14:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_steps_done",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("step", sa.String(length=50), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "step", "generation"),
    )
    op.create_table(
        "skill_uses",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("skill_name", sa.String(length=100), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("skill_uses")
    op.drop_table("run_steps_done")
