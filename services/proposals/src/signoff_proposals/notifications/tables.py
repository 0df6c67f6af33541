"""The notifier's tables: webhook subscriptions, deliveries (the outbox and its log), preferences.

Declared on the service's one ``MetaData`` so the schema test compares them with migration
``0008_notifications`` like every other table of the schema.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from signoff_proposals.tables import SCHEMA, metadata

subscriptions = Table(
    "webhook_subscriptions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("format", Text, nullable=False),
    Column("events", JSONB, nullable=False),
    # the HMAC key: the receiver holds a copy, so it is stored as it was shown (once)
    Column("secret", Text, nullable=False),
    Column("description", Text, nullable=False, server_default=text("''")),
    Column("created_by", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("format IN ('signoff', 'slack')", name="ck_webhook_subscriptions_format"),
)
Index("ix_webhook_subscriptions_org", subscriptions.c.organization_id, subscriptions.c.id)

# One row per (event, subscription) or (event, person, notice): written by the consumer, sent by
# the delivery loop outside any transaction. ``dedup_key`` makes a replayed event add nothing.
deliveries = Table(
    "notification_deliveries",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("dedup_key", Text, nullable=False, unique=True),
    Column("organization_id", Text, nullable=False),
    Column("proposal_id", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("subscription_id", Text),
    Column("recipient", Text),
    Column("payload", JSONB, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_error", Text),
    Column("response_status", Integer),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True)),
    CheckConstraint("channel IN ('webhook', 'email')", name="ck_notification_deliveries_channel"),
    CheckConstraint(
        "status IN ('pending', 'sent', 'dead', 'skipped')",
        name="ck_notification_deliveries_status",
    ),
)
Index(
    "ix_notification_deliveries_due",
    deliveries.c.next_attempt_at,
    postgresql_where=text("status = 'pending'"),
)
Index(
    "ix_notification_deliveries_subscription",
    deliveries.c.subscription_id,
    deliveries.c.id.desc(),
)

# A person's choice per organization; no row means "send me notices".
preferences = Table(
    "notification_preferences",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("organization_id", Text, primary_key=True),
    Column("email", Boolean, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

__all__ = ["SCHEMA", "deliveries", "preferences", "subscriptions"]
