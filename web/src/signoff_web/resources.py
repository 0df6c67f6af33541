"""Where a person starts: their organization's orders and broadcast forms, read-only.

Read straight from the club's read model (the domain package, never a service's code), always
filtered by the session's organization.
"""

from __future__ import annotations

from typing import Any

from signoff_club import tables as t
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection


async def orders(conn: AsyncConnection, organization_id: str) -> list[dict[str, Any]]:
    o, p = t.orders, t.participants
    rows = await conn.execute(
        select(o.c.id, o.c.currency, o.c.total_cents, o.c.created_at, p.c.name)
        .join_from(o, p, p.c.id == o.c.participant_id)
        .where(o.c.organization_id == organization_id)
        .order_by(o.c.created_at.desc(), o.c.id)
        .limit(100)
    )
    return [dict(row._mapping) for row in rows]


async def broadcasts(conn: AsyncConnection, organization_id: str) -> list[dict[str, Any]]:
    b = t.broadcast_forms
    rows = await conn.execute(
        select(b.c.id, b.c.name, b.c.subject)
        .where(b.c.organization_id == organization_id)
        .order_by(b.c.name, b.c.id)
        .limit(100)
    )
    return [dict(row._mapping) for row in rows]
