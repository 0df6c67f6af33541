"""The ``proposals`` schema: proposals, their audit trail, pause points, the outbox and inbox.

The tables are declared here once and the hand-written migration ``0001_initial`` creates the
same shape; ``tests/integration/test_schema.py`` compares the two so they cannot drift.
"""

from __future__ import annotations

from signoff_contracts.status import PausePointStatus, ProposalStatus
from signoff_runtime.inbox import inbox_table
from signoff_runtime.outbox import outbox_table
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
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

SCHEMA = "proposals"
metadata = MetaData(schema=SCHEMA)


def _in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


PROPOSAL_STATUSES = [s.value for s in ProposalStatus]
PAUSE_POINT_STATUSES = [s.value for s in PausePointStatus]

proposals = Table(
    "proposals",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, nullable=False),
    Column("requested_by", Text, nullable=False),
    Column("conversation_id", Text),
    Column("section", Text, nullable=False),
    Column("resource_id", Text, nullable=False),
    Column("operation_kind", Text, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("request", JSONB, nullable=False),
    Column("arguments", JSONB, nullable=False),
    Column("preview", JSONB, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("decided_by", Text),
    Column("decided_at", DateTime(timezone=True)),
    Column("decline_reason", Text),
    Column("superseded_by", Text),
    Column("contract_id", Text, unique=True),
    Column("execute_by", DateTime(timezone=True)),
    # when the stuck-execution sweep next looks at an executing proposal, and how often it has
    # re-published its contract (the per-row back-off)
    Column("republish_after", DateTime(timezone=True)),
    Column("republish_count", Integer, nullable=False, server_default=text("0")),
    Column("outcome", JSONB),
    Column("outcome_at", DateTime(timezone=True)),
    # the approval policy frozen in at intake and the approvals so far (migration 0007): the
    # ``approvals`` table is the record, this column the row's copy for views and contracts
    Column("policy_version", Integer),
    Column("approvals_required", Integer, nullable=False, server_default=text("1")),
    Column("approver_roles", JSONB),
    Column("proposer_may_approve", Boolean, nullable=False, server_default=text("true")),
    Column("approvals", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    CheckConstraint(_in("status", PROPOSAL_STATUSES), name="ck_proposals_status"),
    CheckConstraint("char_length(decline_reason) <= 500", name="ck_proposals_decline_reason"),
)

# The pending list per organization, newest first (ids sort by creation time).
Index(
    "ix_proposals_pending_by_org",
    proposals.c.organization_id,
    proposals.c.id.desc(),
    postgresql_where=text("status = 'pending'"),
)
Index("ix_proposals_by_org", proposals.c.organization_id, proposals.c.id.desc())
Index(
    "ix_proposals_pending_expiry",
    proposals.c.expires_at,
    postgresql_where=text("status = 'pending'"),
)
Index(
    "ix_proposals_executing_republish",
    proposals.c.republish_after,
    postgresql_where=text("status = 'executing'"),
)
#: the state gauge's count of the third open status (``lifecycle.metrics``)
Index(
    "ix_proposals_needs_reconciliation",
    proposals.c.id,
    postgresql_where=text("status = 'needs_reconciliation'"),
)

audit = Table(
    "audit",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("proposal_id", Text, ForeignKey(f"{SCHEMA}.proposals.id"), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("from_status", Text),
    Column("to_status", Text),
    Column("detail", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
)
Index("ix_audit_proposal", audit.c.proposal_id, audit.c.id)

pause_points = Table(
    "pause_points",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, nullable=False),
    Column("requested_by", Text, nullable=False),
    Column("conversation_id", Text),
    Column("title", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("options", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("payload", JSONB),
    Column("kind", Text, nullable=False),
    Column("form_schema", JSONB),
    Column("status", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("resolution", JSONB),
    Column("resolved_by", Text),
    Column("resolved_at", DateTime(timezone=True)),
    # who may answer and the agent's turn that asked (migration 0006)
    Column("answerable_by", Text, nullable=False, server_default=text("'owner'")),
    Column("turn_id", Text),
    CheckConstraint(_in("status", PAUSE_POINT_STATUSES), name="ck_pause_points_status"),
    CheckConstraint(_in("kind", ["approval", "choice", "data_entry"]), name="ck_pause_points_kind"),
    CheckConstraint(_in("answerable_by", ["owner", "team"]), name="ck_pause_points_answerable_by"),
)
Index(
    "ix_pause_points_pending_by_org",
    pause_points.c.organization_id,
    pause_points.c.id.desc(),
    postgresql_where=text("status = 'pending'"),
)
# the expiry sweep's look for lapsed pending pause points (migration 0003)
Index(
    "ix_pause_points_pending_expiry",
    pause_points.c.expires_at,
    postgresql_where=text("status = 'pending'"),
)

# Approval policies (migration 0007): every version of an organization's policy for an operation
# kind, append-only — the newest is in force, the older ones are its audit trail.
approval_policies = Table(
    "approval_policies",
    metadata,
    Column("organization_id", Text, primary_key=True),
    Column("operation_kind", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("rules", JSONB, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("set_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("version >= 1", name="ck_approval_policies_version"),
)

# One row per person who approved a proposal: the primary key makes a second approval by the
# same person a no-op, and the quorum is the count of these rows (``policies.quorum``).
approvals = Table(
    "approvals",
    metadata,
    Column("proposal_id", Text, ForeignKey(f"{SCHEMA}.proposals.id"), primary_key=True),
    Column("approver", Text, primary_key=True),
    Column("role", Text, nullable=False),
    Column("approved_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

outbox = outbox_table(metadata, SCHEMA)
# The stuck sweep asks "is a copy of this proposal's contract still waiting to be sent?"
Index(
    "ix_proposals_outbox_unsent_correlation",
    outbox.c.correlation_id,
    postgresql_where=text("sent_at IS NULL"),
)
inbox = inbox_table(metadata, SCHEMA)

# One row per check of an uncertain attempt (``ReconciliationChecked``), shown on
# ``GET /v1/proposals/{id}/reconciliation``; ``message_id`` makes a redelivery insert nothing.
reconciliation_checks = Table(
    "reconciliation_checks",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("message_id", Text, nullable=False, unique=True),
    Column("proposal_id", Text, ForeignKey(f"{SCHEMA}.proposals.id"), nullable=False),
    Column("attempt_id", Text, nullable=False),
    Column("check_number", Integer, nullable=False),
    Column("result", Text, nullable=False),
    Column("detail", Text),
    Column("next_check_at", DateTime(timezone=True)),
    Column("checked_at", DateTime(timezone=True), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
Index(
    "ix_reconciliation_checks_proposal",
    reconciliation_checks.c.proposal_id,
    reconciliation_checks.c.id,
)
