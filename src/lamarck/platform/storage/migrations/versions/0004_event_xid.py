"""events record their writing transaction, so readers deliver ids that commit out of order (see event_order)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 21:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("xid", sa.BigInteger(), nullable=False, server_default="0"))
    if op.get_bind().dialect.name == "postgresql":  # rows inserted without the ORM get their transaction too
        op.alter_column("events", "xid", server_default=sa.text("(pg_current_xact_id()::text::bigint)"))
    op.create_index("ix_events_xid_id", "events", ["xid", "id"])
    op.create_index("ix_events_run_id_xid_id", "events", ["run_id", "xid", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_run_id_xid_id", table_name="events")
    op.drop_index("ix_events_xid_id", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("xid")
