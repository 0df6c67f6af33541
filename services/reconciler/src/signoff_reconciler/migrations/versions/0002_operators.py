"""reconciler: checks found by the stranded scan, given up or resolved by an operator; the
dead-letter archive

Revision ID: 0002_operators
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0002_operators"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "reconciler"
TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    # a check the stranded scan opened knows no contract or request message (yet)
    op.alter_column("checks", "contract_id", nullable=True, schema=SCHEMA)
    op.alter_column("checks", "required_message_id", nullable=True, schema=SCHEMA)
    op.drop_constraint("ck_checks_status", "checks", schema=SCHEMA)
    op.create_check_constraint(
        "ck_checks_status", "checks", "status IN ('open', 'resolved', 'gave_up')", schema=SCHEMA
    )
    op.add_column(
        "checks",
        sa.Column("found_by", sa.Text, nullable=False, server_default=sa.text("'request'")),
        schema=SCHEMA,
    )
    op.add_column("checks", sa.Column("resolved_by", sa.Text), schema=SCHEMA)
    op.add_column("checks", sa.Column("operator", sa.Text), schema=SCHEMA)
    op.add_column("checks", sa.Column("note", sa.Text), schema=SCHEMA)
    op.create_table(
        "dead_letters",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("queue", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("deliveries", sa.Integer),
        sa.Column("message_id", sa.Text),
        sa.Column("message_type", sa.Text),
        sa.Column("correlation_id", sa.Text),
        sa.Column("content_type", sa.Text),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("headers", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("dead_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("replayed_at", TZ),
        sa.Column("replayed_by", sa.Text),
        sa.Column("replay_note", sa.Text),
        schema=SCHEMA,
    )
    op.create_index(
        "ux_dead_letters_unreplayed",
        "dead_letters",
        ["queue", "message_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text("replayed_at IS NULL"),
    )
    op.create_index("ix_dead_letters_queue", "dead_letters", ["queue", "id"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_table("dead_letters", schema=SCHEMA)
    for column in ("note", "operator", "resolved_by", "found_by"):
        op.drop_column("checks", column, schema=SCHEMA)
    op.drop_constraint("ck_checks_status", "checks", schema=SCHEMA)
    op.create_check_constraint(
        "ck_checks_status", "checks", "status IN ('open', 'resolved')", schema=SCHEMA
    )
    op.alter_column("checks", "required_message_id", nullable=False, schema=SCHEMA)
    op.alter_column("checks", "contract_id", nullable=False, schema=SCHEMA)
