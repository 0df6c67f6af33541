"""proposals, audit, pause points, outbox, inbox

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
TZ = sa.DateTime(timezone=True)
PROPOSAL_STATUSES = (
    "'pending', 'declined', 'expired', 'superseded', 'executing', 'needs_reconciliation', "
    "'succeeded', 'revision_required', 'failed'"
)


def upgrade() -> None:
    _proposals()
    _audit()
    _pause_points()
    _outbox_and_inbox()


def _proposals() -> None:
    op.create_table(
        "proposals",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("requested_by", sa.Text, nullable=False),
        sa.Column("conversation_id", sa.Text),
        sa.Column("section", sa.Text, nullable=False),
        sa.Column("resource_id", sa.Text, nullable=False),
        sa.Column("operation_kind", sa.Text, nullable=False),
        sa.Column("contract_version", sa.Integer, nullable=False),
        sa.Column("request", JSONB, nullable=False),
        sa.Column("arguments", JSONB, nullable=False),
        sa.Column("preview", JSONB, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("decided_by", sa.Text),
        sa.Column("decided_at", TZ),
        sa.Column("decline_reason", sa.Text),
        sa.Column("superseded_by", sa.Text),
        sa.Column("contract_id", sa.Text, unique=True),
        sa.Column("execute_by", TZ),
        sa.Column("republish_after", TZ),
        sa.Column("republish_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("outcome", JSONB),
        sa.Column("outcome_at", TZ),
        sa.CheckConstraint(f"status IN ({PROPOSAL_STATUSES})", name="ck_proposals_status"),
        sa.CheckConstraint(
            "char_length(decline_reason) <= 500", name="ck_proposals_decline_reason"
        ),
        schema=S,
    )
    op.create_index(
        "ix_proposals_pending_by_org",
        "proposals",
        ["organization_id", sa.text("id DESC")],
        schema=S,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_proposals_by_org", "proposals", ["organization_id", sa.text("id DESC")], schema=S
    )
    op.create_index(
        "ix_proposals_pending_expiry",
        "proposals",
        ["expires_at"],
        schema=S,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_proposals_executing_republish",
        "proposals",
        ["republish_after"],
        schema=S,
        postgresql_where=sa.text("status = 'executing'"),
    )


def _audit() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("proposal_id", sa.Text, sa.ForeignKey(f"{S}.proposals.id"), nullable=False),
        sa.Column("at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("from_status", sa.Text),
        sa.Column("to_status", sa.Text),
        sa.Column("detail", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        schema=S,
    )
    op.create_index("ix_audit_proposal", "audit", ["proposal_id", "id"], schema=S)
    # Append-only: the audit trail is evidence, so the database itself refuses to rewrite it.
    op.execute(
        f"CREATE FUNCTION {S}.audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'proposals.audit is append-only'; END $$"
    )
    op.execute(
        f"CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON {S}.audit "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.audit_append_only()"
    )


def _pause_points() -> None:
    op.create_table(
        "pause_points",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("requested_by", sa.Text, nullable=False),
        sa.Column("conversation_id", sa.Text),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("options", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("payload", JSONB),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("form_schema", JSONB),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("resolution", JSONB),
        sa.Column("resolved_by", sa.Text),
        sa.Column("resolved_at", TZ),
        sa.CheckConstraint(
            "status IN ('pending', 'resolved', 'expired')", name="ck_pause_points_status"
        ),
        sa.CheckConstraint(
            "kind IN ('approval', 'choice', 'data_entry')", name="ck_pause_points_kind"
        ),
        schema=S,
    )
    op.create_index(
        "ix_pause_points_pending_by_org",
        "pause_points",
        ["organization_id", sa.text("id DESC")],
        schema=S,
        postgresql_where=sa.text("status = 'pending'"),
    )


def _outbox_and_inbox() -> None:
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
        sa.Column("created_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("available_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("sent_at", TZ),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_error", sa.Text),
        schema=S,
    )
    op.create_index(
        f"ix_{S}_outbox_unsent",
        "outbox",
        ["id"],
        schema=S,
        postgresql_where=sa.text("sent_at IS NULL"),
    )
    op.create_index(
        "ix_proposals_outbox_unsent_correlation",
        "outbox",
        ["correlation_id"],
        schema=S,
        postgresql_where=sa.text("sent_at IS NULL"),
    )
    op.create_table(
        "inbox",
        sa.Column("message_id", sa.Text, primary_key=True),
        sa.Column("received_at", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("result", JSONB),
        schema=S,
    )


def downgrade() -> None:
    for table in ("inbox", "outbox", "pause_points", "audit", "proposals"):
        op.drop_table(table, schema=S)
    op.execute(f"DROP FUNCTION IF EXISTS {S}.audit_append_only()")
