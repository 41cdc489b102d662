"""llm_calls: the step, prompt and reply text and trace id of each model call, and an index to find an episode's calls

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 15:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("step", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("prompt", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("response", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("trace_id", sa.String(length=32), nullable=True))
    op.create_index("ix_llm_calls_episode_id", "llm_calls", ["episode_id"])


def downgrade() -> None:
    op.drop_index("ix_llm_calls_episode_id", table_name="llm_calls")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("trace_id")
        batch.drop_column("response")
        batch.drop_column("prompt")
        batch.drop_column("step")
