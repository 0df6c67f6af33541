"""The agent schema: conversations, messages, cards, notes, journal, inbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

S = "agent"


def _now() -> sa.Column[object]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


def _jsonb(name: str) -> sa.Column[object]:
    return sa.Column(
        name, postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")
    )


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("organization_id", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("section", sa.Text(), nullable=False),
        sa.Column("resource_id", sa.Text(), nullable=False),
        _now(),
        sa.Column("turn_id", sa.Text()),
        sa.Column("turn_expires_at", sa.DateTime(timezone=True)),
        sa.Column("pending_trigger", sa.Text()),
        schema=S,
    )
    op.create_index(
        "ix_agent_conversations_org", "conversations", ["organization_id", "created_at"], schema=S
    )
    op.create_index(
        "ix_agent_conversations_pending",
        "conversations",
        ["id"],
        schema=S,
        postgresql_where=sa.text("pending_trigger IS NOT NULL"),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), sa.Identity(), nullable=False, unique=True),
        sa.Column(
            "conversation_id", sa.Text(), sa.ForeignKey(f"{S}.conversations.id"), nullable=False
        ),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("synthetic", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("author", sa.Text()),
        sa.Column("content", sa.Text()),
        sa.Column("code", sa.Text()),
        _jsonb("params"),
        sa.Column("proposal_id", sa.Text()),
        sa.Column("pause_point_id", sa.Text()),
        sa.Column("kind", sa.Text()),
        sa.Column("turn_id", sa.Text()),
        _now(),
        sa.CheckConstraint("role IN ('user', 'assistant', 'app')", name="ck_agent_messages_role"),
        schema=S,
    )
    op.create_index(
        "ix_agent_messages_conversation", "messages", ["conversation_id", "seq"], schema=S
    )
    op.create_index(
        "ux_agent_messages_proposal_kind",
        "messages",
        ["proposal_id", "kind"],
        unique=True,
        schema=S,
        postgresql_where=sa.text("proposal_id IS NOT NULL AND kind IS NOT NULL"),
    )
    op.create_index(
        "ux_agent_messages_pause_point_kind",
        "messages",
        ["pause_point_id", "kind"],
        unique=True,
        schema=S,
        postgresql_where=sa.text("pause_point_id IS NOT NULL AND kind IS NOT NULL"),
    )
    op.create_table(
        "cards",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column(
            "conversation_id", sa.Text(), sa.ForeignKey(f"{S}.conversations.id"), nullable=False
        ),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("operation_kind", sa.Text()),
        sa.Column("replaced_by", sa.Text()),
        sa.Column("replaces", sa.Text()),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        schema=S,
    )
    op.create_index("ix_agent_cards_conversation", "cards", ["conversation_id"], schema=S)
    op.create_table(
        "notes",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column(
            "conversation_id", sa.Text(), sa.ForeignKey(f"{S}.conversations.id"), nullable=False
        ),
        sa.Column("proposal_id", sa.Text(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        _jsonb("params"),
        _now(),
        sa.Column("consumed_by", sa.Text()),
        schema=S,
    )
    op.create_index(
        "ix_agent_notes_unconsumed",
        "notes",
        ["conversation_id"],
        schema=S,
        postgresql_where=sa.text("consumed_by IS NULL"),
    )
    op.create_table(
        "journal",
        sa.Column("seq", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        _now(),
        schema=S,
    )
    op.create_index(
        "ix_agent_journal_conversation", "journal", ["conversation_id", "seq"], schema=S
    )
    op.create_table(
        "inbox",
        sa.Column("message_id", sa.Text(), primary_key=True),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("result", postgresql.JSONB()),
        schema=S,
    )


def downgrade() -> None:
    for table in ("inbox", "journal", "notes", "cards", "messages", "conversations"):
        op.drop_table(table, schema=S)
