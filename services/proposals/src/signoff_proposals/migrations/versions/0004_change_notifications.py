"""change notifications: every proposal and pause-point state change NOTIFYs its organization

Revision ID: 0004_change_notifications
Revises: 0003_pause_points_revisions
Create Date: 2026-12-02

The event stream (``GET /v1/events``) pushes state changes to frontends instead of letting them
poll. Triggers, not calls in each writer, so that no transition can be forgotten — intake,
revisions, decisions, outcomes, sweeps — and the notification is sent exactly when the
transaction commits (PostgreSQL delivers ``NOTIFY`` at commit, never for a rollback).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004_change_notifications"
down_revision: str | None = "0003_pause_points_revisions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "proposals"
CHANNEL = "proposals_changes"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION {S}.notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('{CHANNEL}', json_build_object(
            'org', NEW.organization_id, 'type', TG_ARGV[0], 'id', NEW.id,
            'status', NEW.status, 'conversation_id', NEW.conversation_id)::text);
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"CREATE TRIGGER proposals_notify_change AFTER INSERT OR UPDATE OF status, outcome, "
        f"superseded_by ON {S}.proposals FOR EACH ROW "
        f"EXECUTE FUNCTION {S}.notify_change('proposal')"
    )
    op.execute(
        f"CREATE TRIGGER pause_points_notify_change AFTER INSERT OR UPDATE OF status, resolution "
        f"ON {S}.pause_points FOR EACH ROW EXECUTE FUNCTION {S}.notify_change('pause_point')"
    )


def downgrade() -> None:
    op.execute(f"DROP TRIGGER pause_points_notify_change ON {S}.pause_points")
    op.execute(f"DROP TRIGGER proposals_notify_change ON {S}.proposals")
    op.execute(f"DROP FUNCTION {S}.notify_change()")
