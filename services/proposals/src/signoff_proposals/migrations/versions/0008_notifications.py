"""notifications: webhook subscriptions, deliveries, people's preferences

Revision ID: 0008_notifications
Revises: 0007_approval_policies
Create Date: 2026-11-30

The notifier (``signoff_proposals.notifications``) turns proposal events into delivery rows and
sends them outside any transaction; these tables hold what it must not lose across a restart.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0008_notifications"
down_revision: str | None = "0007_approval_policies"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "webhook_subscriptions",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("format", sa.Text, nullable=False),
        sa.Column("events", JSONB, nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint(
            "format IN ('signoff', 'slack')", name="ck_webhook_subscriptions_format"
        ),
        schema=S,
    )
    op.create_index(
        "ix_webhook_subscriptions_org",
        "webhook_subscriptions",
        ["organization_id", "id"],
        schema=S,
    )
    op.create_table(
        "notification_deliveries",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("dedup_key", sa.Text, nullable=False, unique=True),
        sa.Column("organization_id", sa.Text, nullable=False),
        sa.Column("proposal_id", sa.Text, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("subscription_id", sa.Text),
        sa.Column("recipient", sa.Text),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'pending'")),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column(
            "next_attempt_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW
        ),
        sa.Column("last_error", sa.Text),
        sa.Column("response_status", sa.Integer),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint(
            "channel IN ('webhook', 'email')", name="ck_notification_deliveries_channel"
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'sent', 'dead', 'skipped')",
            name="ck_notification_deliveries_status",
        ),
        schema=S,
    )
    op.create_index(
        "ix_notification_deliveries_due",
        "notification_deliveries",
        ["next_attempt_at"],
        schema=S,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_notification_deliveries_subscription",
        "notification_deliveries",
        ["subscription_id", sa.text("id DESC")],
        schema=S,
    )
    op.create_table(
        "notification_preferences",
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, primary_key=True),
        sa.Column("email", sa.Boolean, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        schema=S,
    )


def downgrade() -> None:
    op.drop_table("notification_preferences", schema=S)
    op.drop_table("notification_deliveries", schema=S)
    op.drop_table("webhook_subscriptions", schema=S)
