"""The reconciler's tables (schema ``reconciler``): one check per uncertain attempt, inbox, outbox.

A ``checks`` row is keyed by the domain's ``attempt_id`` (unique), so however often the same
``ReconciliationRequired`` arrives there is one check. ``lease_owner``/``lease_until`` let any
number of reconcilers share due checks without holding row locks between them: a check whose
lease expired (its reconciler died mid-check) is simply due again.
"""

from __future__ import annotations

from signoff_runtime.inbox import inbox_table
from signoff_runtime.outbox import outbox_table
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "reconciler"
metadata = MetaData(schema=SCHEMA)

checks = Table(
    "checks",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("attempt_id", Text, nullable=False, unique=True),
    Column("proposal_id", Text, nullable=False),
    Column("contract_id", Text, nullable=False),
    Column("organization_id", Text, nullable=False),
    Column("operation_kind", Text, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("required_message_id", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'open'")),
    Column("next_check_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("checks", Integer, nullable=False, server_default=text("0")),
    Column("last_checked_at", DateTime(timezone=True)),
    Column("last_result", JSONB),
    Column("outcome", JSONB),
    Column("outcome_message_id", Text),
    Column("lease_owner", Text),
    Column("lease_until", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("resolved_at", DateTime(timezone=True)),
    CheckConstraint("status IN ('open', 'resolved')", name="ck_checks_status"),
    Index("ix_checks_due", "next_check_at", postgresql_where=text("status = 'open'")),
    Index("ix_checks_proposal_id", "proposal_id"),
)

inbox = inbox_table(metadata, SCHEMA)
outbox = outbox_table(metadata, SCHEMA)
