"""reconciliation checks: one row per check of an uncertain attempt, for its status page

Revision ID: 0002_reconciliation_checks
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_reconciliation_checks"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "reconciliation_checks",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        # the ReconciliationChecked message's id: a redelivered copy inserts nothing
        sa.Column("message_id", sa.Text, nullable=False, unique=True),
        sa.Column("proposal_id", sa.Text, sa.ForeignKey(f"{S}.proposals.id"), nullable=False),
        sa.Column("attempt_id", sa.Text, nullable=False),
        sa.Column("check_number", sa.Integer, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("next_check_at", TZ),
        sa.Column("checked_at", TZ, nullable=False),
        sa.Column("recorded_at", TZ, nullable=False, server_default=sa.func.now()),
        schema=S,
    )
    op.create_index(
        "ix_reconciliation_checks_proposal",
        "reconciliation_checks",
        ["proposal_id", "id"],
        schema=S,
    )


def downgrade() -> None:
    op.drop_table("reconciliation_checks", schema=S)
