"""Payments keep the card's last four digits, so a refund's outcome can name the card.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

S = "club"


def upgrade() -> None:
    op.add_column("payments", sa.Column("card_last4", sa.Text, nullable=True), schema=S)
    op.create_check_constraint(
        "payments_card_last4",
        "payments",
        "card_last4 IS NULL OR card_last4 ~ '^[0-9]{4}$'",
        schema=S,
    )


def downgrade() -> None:
    op.drop_constraint("payments_card_last4", "payments", schema=S, type_="check")
    op.drop_column("payments", "card_last4", schema=S)
