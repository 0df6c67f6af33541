"""The executor's tables (schema ``executor``): the dedup row of each contract and the outbox.

``executions`` is the executor's memory of a contract, keyed by ``contract_id``. Its row is
written in the same transaction as the contract's effect, so "was this contract run?" has exactly
one answer, and competing executors serialize on it: one ``INSERT … ON CONFLICT DO UPDATE …
RETURNING`` inserts the row or locks the existing one (``repository.claim``).

``status``: ``started`` exists only inside the transaction that inserted the row (it never
commits as such); ``attempting`` means an external call may be under way or may have happened
(committed before the call); ``done`` means the outcome is stored and in the outbox.
"""

from __future__ import annotations

from signoff_runtime.outbox import outbox_table
from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "executor"
metadata = MetaData(schema=SCHEMA)

executions = Table(
    "executions",
    metadata,
    Column("contract_id", Text, primary_key=True),
    Column("proposal_id", Text, nullable=False),
    Column("organization_id", Text, nullable=False),
    Column("operation_kind", Text, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("contract_message_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("attempt_id", Text),
    Column("idempotency_key", Text),
    Column("outcome", JSONB),
    Column("outcome_message_id", Text),
    Column("reconciliation_message_id", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("status IN ('started', 'attempting', 'done')", name="ck_executions_status"),
    CheckConstraint(
        "status <> 'done' OR (outcome IS NOT NULL AND outcome_message_id IS NOT NULL)",
        name="ck_executions_done_has_outcome",
    ),
    Index("ix_executions_proposal_id", "proposal_id"),
)

outbox = outbox_table(metadata, SCHEMA)
