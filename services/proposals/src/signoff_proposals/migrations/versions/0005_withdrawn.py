"""withdrawn: a proposer (or a manager) may take a pending proposal back

Revision ID: 0005_withdrawn
Revises: 0004_change_notifications
Create Date: 2026-12-03

The status check constraint gains ``withdrawn`` (``signoff_contracts.status``); nothing else
changes shape — a withdrawal is written like a decline (``decided_by``, ``decided_at``, the
reason in ``decline_reason``), and its audit entry says ``withdrawn``.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005_withdrawn"
down_revision: str | None = "0004_change_notifications"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
_BEFORE = [
    "pending",
    "declined",
    "expired",
    "superseded",
    "executing",
    "needs_reconciliation",
    "succeeded",
    "revision_required",
    "failed",
]
_AFTER = [*_BEFORE[:2], "withdrawn", *_BEFORE[2:]]


def _check(values: list[str]) -> str:
    return f"status IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint("ck_proposals_status", "proposals", schema=S, type_="check")
    op.create_check_constraint("ck_proposals_status", "proposals", _check(_AFTER), schema=S)


def downgrade() -> None:
    op.drop_constraint("ck_proposals_status", "proposals", schema=S, type_="check")
    op.create_check_constraint("ck_proposals_status", "proposals", _check(_BEFORE), schema=S)
