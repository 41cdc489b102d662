"""events: an index by type, so a reader of one kind of event (the training jobs' read model) does not scan the log

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 18:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_type_id", "events", ["type", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_type_id", table_name="events")
