"""pause points: the expiry sweep's index

Revision ID: 0003_pause_points_revisions
Revises: 0002_reconciliation_checks
Create Date: 2026-12-01

Pause points and revisions need no new column (a revision's link is ``superseded_by`` on the old
proposal plus the new one's ``created`` audit entry). The expiry sweep, though, now also looks
for lapsed pending pause points every few seconds; without this partial index that look is a
scan of every pause point ever stored.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_pause_points_revisions"
down_revision: str | None = "0002_reconciliation_checks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"


def upgrade() -> None:
    op.create_index(
        "ix_pause_points_pending_expiry",
        "pause_points",
        ["expires_at"],
        schema=S,
        postgresql_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_index("ix_pause_points_pending_expiry", table_name="pause_points", schema=S)
