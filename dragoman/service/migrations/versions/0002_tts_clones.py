"""voice matches ("clones", issue 14): the tts_clones table

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 03:35:00
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
        "tts_clones",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("clip_key", sa.String(length=300), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tts_clones")),
    )
    with op.batch_alter_table("tts_clones", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tts_clones_key_id"), ["key_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tts_clones", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tts_clones_key_id"))
    op.drop_table("tts_clones")
