"""executor: executions (dedup row per contract) and outbox

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

SCHEMA = "executor"


def upgrade() -> None:
    op.create_table(
        "executions",
        sa.Column("contract_id", sa.Text, primary_key=True),
        sa.Column("proposal_id", sa.Text, nullable=False),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("operation_kind", sa.Text, nullable=False),
        sa.Column("contract_version", sa.Integer, nullable=False),
        sa.Column("contract_message_id", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempt_id", sa.Text),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("outcome", JSONB),
        sa.Column("outcome_message_id", sa.Text),
        sa.Column("reconciliation_message_id", sa.Text),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "status IN ('started', 'attempting', 'done')", name="ck_executions_status"
        ),
        sa.CheckConstraint(
            "status <> 'done' OR (outcome IS NOT NULL AND outcome_message_id IS NOT NULL)",
            name="ck_executions_done_has_outcome",
        ),
        schema=SCHEMA,
    )
    op.create_index("ix_executions_proposal_id", "executions", ["proposal_id"], schema=SCHEMA)
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
    op.drop_table("executions", schema=SCHEMA)
