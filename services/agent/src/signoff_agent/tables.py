"""The agent's own schema: conversations, their messages, the cards they show, and journals.

- ``conversations``: one assistant on one resource, in one organization; ``turn_id`` and
  ``turn_expires_at`` are the lease of the turn running now (one at a time), and
  ``pending_trigger`` a message that still waits for a turn (a pause point's resolution);
- ``messages``: in order by ``seq``. App-authored messages store a ``code`` and ``params``
  (rendered in each viewer's locale on read); ``kind`` makes a hand-back unique per proposal or
  pause point, so a duplicate event writes nothing;
- ``cards``: the proposals and pause points a conversation shows, with their latest status and,
  for a revision, the card that replaced them;
- ``notes``: what the model should know on the person's next message (a decline's reason, a
  revision required), consumed by the turn that carried them;
- ``journal``: every change a conversation's event stream must deliver, in commit order;
- ``propose_keys``: the proposal id each ``Idempotency-Key`` of the propose endpoint stands for
  (per person), with a digest of the request it came with.
"""

from __future__ import annotations

from signoff_runtime.inbox import inbox_table
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    MetaData,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "agent"
metadata = MetaData(schema=SCHEMA)

conversations = Table(
    "conversations",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("section", Text, nullable=False),
    Column("resource_id", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("turn_id", Text),
    Column("turn_expires_at", DateTime(timezone=True)),
    Column("pending_trigger", Text),
    Index("ix_agent_conversations_org", "organization_id", "created_at"),
    Index(
        "ix_agent_conversations_pending",
        "id",
        postgresql_where=text("pending_trigger IS NOT NULL"),
    ),
)

messages = Table(
    "messages",
    metadata,
    Column("id", Text, primary_key=True),
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    Column("conversation_id", Text, ForeignKey("agent.conversations.id"), nullable=False),
    Column("role", Text, nullable=False),
    Column("synthetic", Boolean, nullable=False, server_default=text("false")),
    Column("author", Text),
    Column("content", Text),
    Column("code", Text),
    Column("params", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("proposal_id", Text),
    Column("pause_point_id", Text),
    Column("kind", Text),
    Column("turn_id", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("role IN ('user', 'assistant', 'app')", name="ck_agent_messages_role"),
    Index("ix_agent_messages_conversation", "conversation_id", "seq"),
    Index(
        "ux_agent_messages_proposal_kind",
        "proposal_id",
        "kind",
        unique=True,
        postgresql_where=text("proposal_id IS NOT NULL AND kind IS NOT NULL"),
    ),
    Index(
        "ux_agent_messages_pause_point_kind",
        "pause_point_id",
        "kind",
        unique=True,
        postgresql_where=text("pause_point_id IS NOT NULL AND kind IS NOT NULL"),
    ),
)

cards = Table(
    "cards",
    metadata,
    Column("id", Text, primary_key=True),
    Column("conversation_id", Text, ForeignKey("agent.conversations.id"), nullable=False),
    Column("type", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("operation_kind", Text),
    Column("replaced_by", Text),
    Column("replaces", Text),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_agent_cards_conversation", "conversation_id"),
)

notes = Table(
    "notes",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("conversation_id", Text, ForeignKey("agent.conversations.id"), nullable=False),
    Column("proposal_id", Text, nullable=False),
    Column("code", Text, nullable=False),
    Column("params", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("consumed_by", Text),
    Index(
        "ix_agent_notes_unconsumed",
        "conversation_id",
        postgresql_where=text("consumed_by IS NULL"),
    ),
)

journal = Table(
    "journal",
    metadata,
    Column("seq", BigInteger, Identity(), primary_key=True),
    Column("conversation_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("ref", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_agent_journal_conversation", "conversation_id", "seq"),
)

propose_keys = Table(
    "propose_keys",
    metadata,
    Column("organization_id", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("proposal_id", Text, nullable=False),
    Column("digest", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

inbox = inbox_table(metadata, SCHEMA)
