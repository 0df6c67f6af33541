"""The reconciler's tables (schema ``reconciler``): one check per uncertain attempt, the dead-letter
archive, inbox, outbox.

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
    LargeBinary,
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
    Column("contract_id", Text),  # unknown for a check the stranded scan opened
    Column("organization_id", Text, nullable=False),
    Column("operation_kind", Text, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("required_message_id", Text),
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
    #: ``request`` (a ReconciliationRequired) or ``scan`` (found stranded)
    Column("found_by", Text, nullable=False, server_default=text("'request'")),
    #: ``reconciler`` or ``operator``; an operator's name and note when one resolved it
    Column("resolved_by", Text),
    Column("operator", Text),
    Column("note", Text),
    #: when the check was first found inconclusive past the escalation bound (it stays open)
    Column("escalated_at", DateTime(timezone=True)),
    #: ``gave_up`` only on rows from before escalation replaced giving up (an operator may
    #: still resolve them)
    CheckConstraint("status IN ('open', 'resolved', 'gave_up')", name="ck_checks_status"),
    Index("ix_checks_due", "next_check_at", postgresql_where=text("status = 'open'")),
    Index("ix_checks_proposal_id", "proposal_id"),
)

#: every dead letter of every queue, archived by the reconciler (``signoff dlq list|replay``);
#: a replay is recorded here — who, when — and a row is never replayed twice
dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("queue", Text, nullable=False),  # the topology key, e.g. ``executor.contracts``
    Column("reason", Text, nullable=False),
    Column("detail", Text),
    Column("deliveries", Integer),  # how often it was delivered before, when known
    Column("message_id", Text),
    Column("message_type", Text),
    Column("correlation_id", Text),
    Column("content_type", Text),
    Column("body", LargeBinary, nullable=False),
    Column("headers", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("dead_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("replayed_at", DateTime(timezone=True)),
    Column("replayed_by", Text),
    Column("replay_note", Text),
    # at-least-once dead-lettering may bring the same letter twice: archive it once
    Index(
        "ux_dead_letters_unreplayed",
        "queue",
        "message_id",
        unique=True,
        postgresql_where=text("replayed_at IS NULL"),
    ),
    Index("ix_dead_letters_queue", "queue", "id"),
)

inbox = inbox_table(metadata, SCHEMA)
outbox = outbox_table(metadata, SCHEMA)
