"""the proposals awaiting reconciliation, indexed: the state gauge counts them every few seconds

Revision ID: 0009_needs_reconciliation_index
Revises: 0008_notifications
Create Date: 2026-12-04

The state gauge (``lifecycle.metrics``) counts the open statuses — pending, executing,
needs_reconciliation — often and the settled ones rarely: counting every status at once read the
whole table every five seconds (0.5 s at a million proposals stored). Pending and executing
proposals already have partial indexes; this gives the third open status one, so each count
reads only its own rows.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_needs_reconciliation_index"
down_revision: str | None = "0008_notifications"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_proposals_needs_reconciliation",
        "proposals",
        ["id"],
        schema="proposals",
        postgresql_where=sa.text("status = 'needs_reconciliation'"),
    )


def downgrade() -> None:
    op.drop_index("ix_proposals_needs_reconciliation", "proposals", schema="proposals")
