"""reconciler: checks (one per uncertain attempt), inbox and outbox

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "reconciler"


def upgrade() -> None:
    op.create_table(
        "checks",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("attempt_id", sa.Text, nullable=False, unique=True),
        sa.Column("proposal_id", sa.Text, nullable=False),
        sa.Column("contract_id", sa.Text, nullable=False),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("operation_kind", sa.Text, nullable=False),
        sa.Column("contract_version", sa.Integer, nullable=False),
        sa.Column("required_message_id", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'open'")),
        sa.Column(
            "next_check_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
        sa.Column("checks", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_checked_at", sa.DateTime(timezone=True)),
        sa.Column("last_result", JSONB),
        sa.Column("outcome", JSONB),
        sa.Column("outcome_message_id", sa.Text),
        sa.Column("lease_owner", sa.Text),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('open', 'resolved')", name="ck_checks_status"),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_checks_due",
        "checks",
        ["next_check_at"],
        schema=SCHEMA,
        postgresql_where=sa.text("status = 'open'"),
    )
    op.create_index("ix_checks_proposal_id", "checks", ["proposal_id"], schema=SCHEMA)
    op.create_table(
        "inbox",
        sa.Column("message_id", sa.Text, primary_key=True),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("result", JSONB),
        schema=SCHEMA,
    )
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("message_id", sa.Text, nullable=False, unique=True),
        sa.Column("exchange", sa.Text, nullable=False),
        sa.Column("routing_key", sa.Text, nullable=False),
        sa.Column("message_type", sa.Text, nullable=False),
        sa.Column("correlation_id", sa.Text),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("headers", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "available_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_error", sa.Text),
        schema=SCHEMA,
    )
    op.create_index(
        f"ix_{SCHEMA}_outbox_unsent",
        "outbox",
        ["id"],
        schema=SCHEMA,
        postgresql_where=sa.text("sent_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("outbox", schema=SCHEMA)
    op.drop_table("inbox", schema=SCHEMA)
    op.drop_table("checks", schema=SCHEMA)
