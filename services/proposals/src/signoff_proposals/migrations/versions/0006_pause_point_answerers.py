"""pause points: who may answer, and the turn that asked

Revision ID: 0006_pause_point_answerers
Revises: 0005_withdrawn
Create Date: 2026-12-03

``answerable_by``: ``owner`` (only the person whose conversation asked; every existing row, as
the seed's owner-only rule says) or ``team`` (an assistant's declaration). ``turn_id``: the
agent's turn that asked (``agent.messages.turn_id``), so the audit joins a pause point to its
place in the conversation. The edited payload needs no column: it is part of ``resolution``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_pause_point_answerers"
down_revision: str | None = "0005_withdrawn"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"


def upgrade() -> None:
    op.add_column(
        "pause_points",
        sa.Column("answerable_by", sa.Text, nullable=False, server_default=sa.text("'owner'")),
        schema=S,
    )
    op.add_column("pause_points", sa.Column("turn_id", sa.Text), schema=S)
    op.create_check_constraint(
        "ck_pause_points_answerable_by",
        "pause_points",
        "answerable_by IN ('owner', 'team')",
        schema=S,
    )


def downgrade() -> None:
    op.drop_constraint("ck_pause_points_answerable_by", "pause_points", schema=S, type_="check")
    op.drop_column("pause_points", "turn_id", schema=S)
    op.drop_column("pause_points", "answerable_by", schema=S)
