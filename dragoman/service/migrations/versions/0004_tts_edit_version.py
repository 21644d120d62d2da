"""word edits of tts jobs (issue 14): the jobs.edit_version column (compare-and-set of concurrent edits)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 09:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("edit_version", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("edit_version")
