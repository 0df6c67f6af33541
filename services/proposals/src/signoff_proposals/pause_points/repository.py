"""SQL for pause points (SQLAlchemy Core on the caller's connection).

Like proposals, a pause point moves by ONE conditional UPDATE (``… WHERE status = 'pending' AND
expires_at > statement_timestamp() RETURNING *``), so of two people resolving it at once exactly
one wins, and nobody resolves it after its expiry by the database clock, whatever the sweep is
doing. The row is its own dedup record for ``PausePointRequested`` (``ON CONFLICT DO NOTHING``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

from signoff_contracts.status import PausePointStatus
from signoff_contracts.v1 import PausePointView
from signoff_contracts.v2 import PausePointRequested
from sqlalchemy import Row, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.lifecycle.repository import DB_CLOCK, lapsed
from signoff_proposals.tables import pause_points

PENDING = PausePointStatus.PENDING.value


async def insert(
    conn: AsyncConnection,
    msg: PausePointRequested,
    ttl: timedelta,
    *,
    organization_id: str,
    requested_by: str,
) -> Row[Any] | None:
    """Store ``msg`` as pending for the person the service identified; ``None`` if a pause
    point with its id exists (a duplicate)."""
    stmt = (
        pg_insert(pause_points)
        .values(
            id=msg.pause_point_id,
            organization_id=organization_id,
            requested_by=requested_by,
            conversation_id=msg.conversation_id,
            title=msg.title,
            description=msg.description,
            options=list(msg.options),
            payload=msg.payload,
            kind=msg.kind,
            form_schema=msg.form_schema,
            answerable_by=msg.answerable_by,
            turn_id=msg.turn_id,
            status=PENDING,
            expires_at=func.now() + ttl,
        )
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(*pause_points.c)
    )
    return (await conn.execute(stmt)).first()


async def get(conn: AsyncConnection, pause_point_id: str) -> Row[Any] | None:
    """The pause point, with ``lapsed`` (is it past ``expires_at`` by the database clock now?)
    and ``now`` (that clock)."""
    stmt = select(
        *pause_points.c,
        (pause_points.c.expires_at <= DB_CLOCK).label("lapsed"),
        DB_CLOCK.label("now"),
    ).where(pause_points.c.id == pause_point_id)
    return cast("Row[Any] | None", (await conn.execute(stmt)).first())


async def resolve(
    conn: AsyncConnection, pause_point_id: str, resolved_by: str, resolution: dict[str, Any]
) -> Row[Any] | None:
    """The one conditional UPDATE pending → resolved; ``None`` if it did not qualify."""
    stmt = (
        update(pause_points)
        .where(
            pause_points.c.id == pause_point_id,
            pause_points.c.status == PENDING,
            pause_points.c.expires_at > DB_CLOCK,
        )
        .values(
            status=PausePointStatus.RESOLVED.value,
            resolution=resolution,
            resolved_by=resolved_by,
            resolved_at=DB_CLOCK,
        )
        .returning(*pause_points.c)
    )
    return (await conn.execute(stmt)).first()


async def expire(
    conn: AsyncConnection, *, pause_point_id: str | None = None, batch: int = 1
) -> Sequence[Row[Any]]:
    """Mark lapsed pending pause points expired: ``pause_point_id`` only (a resolve noticed it
    before the sweep), or up to ``batch`` that lapsed first (skipping rows others hold)."""
    taken = lapsed(pause_points, batch=batch, row_id=pause_point_id)
    stmt = (
        update(pause_points)
        .where(pause_points.c.id == taken.c.id, pause_points.c.status == PENDING)
        .values(status=PausePointStatus.EXPIRED.value)
        .returning(*pause_points.c)
    )
    return (await conn.execute(stmt)).all()


async def list_answerable(
    conn: AsyncConnection,
    organization_id: str,
    user_id: str,
    *,
    status: PausePointStatus | None,
    limit: int,
    before_id: str | None,
) -> Sequence[Row[Any]]:
    """The organization's pause points ``user_id`` may answer — their own conversations' and
    those declared team-answerable — newest first, keyset-paged by id."""
    stmt = (
        select(*pause_points.c)
        .where(
            pause_points.c.organization_id == organization_id,
            or_(pause_points.c.requested_by == user_id, pause_points.c.answerable_by == "team"),
        )
        .order_by(pause_points.c.id.desc())
        .limit(limit)
    )
    if status is not None:
        stmt = stmt.where(pause_points.c.status == status.value)
    if before_id is not None:
        stmt = stmt.where(pause_points.c.id < before_id)
    return (await conn.execute(stmt)).all()


def may_answer(row: Row[Any], user_id: str) -> bool:
    """The seed's owner-only rule, unless the assistant declared the pause point ``team``."""
    return bool(row.answerable_by == "team" or row.requested_by == user_id)


def view(row: Row[Any]) -> PausePointView:
    return PausePointView(
        id=row.id,
        organization_id=row.organization_id,
        conversation_id=row.conversation_id,
        title=row.title,
        description=row.description,
        options=row.options,
        payload=row.payload,
        kind=row.kind,
        form_schema=row.form_schema,
        status=PausePointStatus(row.status),
        created_at=row.created_at,
        expires_at=row.expires_at,
        resolution=row.resolution,
        resolved_by=row.resolved_by,
        resolved_at=row.resolved_at,
        answerable_by=row.answerable_by,
        turn_id=row.turn_id,
    )
