"""reconciler: a check past the bound is escalated, not given up (``escalated_at``)

Revision ID: 0003_escalation
Revises: 0002_operators
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_escalation"
down_revision: str | None = "0002_operators"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "reconciler"


def upgrade() -> None:
    # ``gave_up`` stays allowed: rows from before this revision keep their history, and an
    # operator may still resolve them
    op.add_column("checks", sa.Column("escalated_at", sa.DateTime(timezone=True)), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("checks", "escalated_at", schema=SCHEMA)
