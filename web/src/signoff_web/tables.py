"""The web's own schema: its sign-in sessions, so that one can be ended on the server.

A session cookie is signed, but a signature alone cannot be taken back: a copied cookie would
work until it expired, sign-out or not. So each session has a row here (``sessions``: its random
id, whose it is, until when, and when it was revoked), the cookie names the row, and every
request checks that the row is still live. Sign-out revokes the row; an operator can revoke all
of a person's sessions (``session_store.revoke_person``).
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, MetaData, Table, Text, func

SCHEMA = "web"
metadata = MetaData(schema=SCHEMA)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("organization_id", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True)),
    Index("sessions_by_user", "user_id"),
)
