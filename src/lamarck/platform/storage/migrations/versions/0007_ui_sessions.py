"""ui_sessions: web UI sign-ins kept in the database, so they survive a restart and reach every API process

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-04 15:05:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_digest"),
    )
    op.create_index("ix_ui_sessions_key_id", "ui_sessions", ["key_id"])
    op.create_index("ix_ui_sessions_expires_at", "ui_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_ui_sessions_expires_at", table_name="ui_sessions")
    op.drop_index("ix_ui_sessions_key_id", table_name="ui_sessions")
    op.drop_table("ui_sessions")
