"""Late fees charged onto orders, which ``order.waive_late_fee`` takes off.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

S = "club"


def upgrade() -> None:
    op.create_table(
        "late_fees",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("order_id", sa.Text, sa.ForeignKey("club.orders.id"), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default="charged"),
        sa.Column("waived_proposal_id", sa.Text, nullable=True, unique=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("amount_cents > 0", name="late_fees_amount"),
        sa.CheckConstraint("status IN ('charged', 'waived')", name="late_fees_status"),
        schema=S,
    )
    op.create_index("late_fees_order", "late_fees", ["order_id"], schema=S)


def downgrade() -> None:
    op.drop_index("late_fees_order", table_name="late_fees", schema=S)
    op.drop_table("late_fees", schema=S)
