"""approval policies: versioned per organization and operation, frozen into proposals

Revision ID: 0007_approval_policies
Revises: 0006_pause_point_answerers
Create Date: 2026-11-30

``approval_policies``: every version of an organization's policy for an operation kind (rules as
data), append-only — a change is a new version, so the table is also the policy's audit trail.
``approvals``: who approved a proposal, one row per person (the primary key makes a repeat a
no-op). ``proposals`` gains the requirement frozen in at intake (every existing row: one
approver, any role the operation allows, the proposer included — the default policy) and a copy
of its approvals; the change notification now also fires when an approval is recorded.
The service role needs no grant of its own: `signoff_runtime.roles.apply` grants it read and
write on every table of its schema, these included (and default privileges cover them).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0007_approval_policies"
down_revision: str | None = "0006_pause_point_answerers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
NOTIFY = (
    f"CREATE TRIGGER proposals_notify_change AFTER INSERT OR UPDATE OF {{columns}} "
    f"ON {S}.proposals FOR EACH ROW EXECUTE FUNCTION {S}.notify_change('proposal')"
)


def upgrade() -> None:
    op.create_table(
        "approval_policies",
        sa.Column("organization_id", sa.Text, primary_key=True),
        sa.Column("operation_kind", sa.Text, primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("rules", JSONB, nullable=False),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column(
            "set_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("version >= 1", name="ck_approval_policies_version"),
        schema=S,
    )
    op.create_table(
        "approvals",
        sa.Column("proposal_id", sa.Text, sa.ForeignKey(f"{S}.proposals.id"), primary_key=True),
        sa.Column("approver", sa.Text, primary_key=True),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column(
            "approved_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        schema=S,
    )
    for table in ("approval_policies", "approvals"):
        # evidence, like the audit trail: the database refuses to rewrite it
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {S}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {S}.audit_append_only()"
        )
    op.add_column("proposals", sa.Column("policy_version", sa.Integer), schema=S)
    op.add_column(
        "proposals",
        sa.Column("approvals_required", sa.Integer, nullable=False, server_default=sa.text("1")),
        schema=S,
    )
    op.add_column("proposals", sa.Column("approver_roles", JSONB), schema=S)
    op.add_column(
        "proposals",
        sa.Column(
            "proposer_may_approve", sa.Boolean, nullable=False, server_default=sa.text("true")
        ),
        schema=S,
    )
    op.add_column(
        "proposals",
        sa.Column("approvals", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        schema=S,
    )
    op.execute(f"DROP TRIGGER proposals_notify_change ON {S}.proposals")
    op.execute(NOTIFY.format(columns="status, outcome, superseded_by, approvals"))


def downgrade() -> None:
    op.execute(f"DROP TRIGGER proposals_notify_change ON {S}.proposals")
    op.execute(NOTIFY.format(columns="status, outcome, superseded_by"))
    for column in (
        "approvals",
        "proposer_may_approve",
        "approver_roles",
        "approvals_required",
        "policy_version",
    ):
        op.drop_column("proposals", column, schema=S)
    op.drop_table("approvals", schema=S)
    op.drop_table("approval_policies", schema=S)
