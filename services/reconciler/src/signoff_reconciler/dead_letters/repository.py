"""The SQL of the dead-letter archive (``reconciler.dead_letters``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_COLUMNS = (
    "id, queue, reason, detail, deliveries, message_id, message_type, correlation_id, "
    "content_type, body, headers, dead_at, replayed_at, replayed_by, replay_note"
)


@dataclass(frozen=True, slots=True)
class NewLetter:
    """A letter to archive, its headers already redacted and made JSON."""

    queue: str
    reason: str
    detail: str | None
    deliveries: int | None
    message_id: str | None
    message_type: str | None
    correlation_id: str | None
    content_type: str | None
    body: bytes
    headers: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter(NewLetter):
    """An archived letter, and its replay if it had one."""

    id: int
    dead_at: datetime
    replayed_at: datetime | None
    replayed_by: str | None
    replay_note: str | None


async def insert(conn: AsyncConnection, letter: NewLetter) -> bool:
    """Archive ``letter``; ``False`` if it (same queue and id, not replayed) is archived already."""
    row = await conn.execute(
        text(
            "INSERT INTO reconciler.dead_letters (queue, reason, detail, deliveries, "
            "message_id, message_type, correlation_id, content_type, body, headers) "
            "VALUES (:q, :reason, :detail, :deliveries, :mid, :mt, :cid, :ct, :body, "
            "CAST(:headers AS jsonb)) ON CONFLICT (queue, message_id) "
            "WHERE replayed_at IS NULL DO NOTHING RETURNING id"
        ),
        {
            "q": letter.queue,
            "reason": letter.reason,
            "detail": None if letter.detail is None else str(letter.detail)[:1000],
            "deliveries": letter.deliveries,
            "mid": letter.message_id,
            "mt": letter.message_type,
            "cid": letter.correlation_id,
            "ct": letter.content_type,
            "body": letter.body,
            "headers": json.dumps(letter.headers),
        },
    )
    return row.first() is not None


async def listing(
    engine: AsyncEngine, *, queue: str | None = None, replayed: bool = False, limit: int = 50
) -> list[DeadLetter]:
    """Archived letters, oldest first; only those not replayed unless ``replayed``."""
    where = ["true"]
    if queue is not None:
        where.append("queue = :queue")
    if not replayed:
        where.append("replayed_at IS NULL")
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM reconciler.dead_letters "  # noqa: S608 - constants
                f"WHERE {' AND '.join(where)} ORDER BY id LIMIT :n"
            ),
            {"queue": queue, "n": limit} if queue is not None else {"n": limit},
        )
        return [_letter(row) for row in rows]


async def one(engine: AsyncEngine, letter_id: int) -> DeadLetter | None:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(f"SELECT {_COLUMNS} FROM reconciler.dead_letters WHERE id = :id"),  # noqa: S608
                {"id": letter_id},
            )
        ).first()
    return None if row is None else _letter(row)


async def lock(conn: AsyncConnection, letter_id: int) -> DeadLetter | None:
    """The letter, its row locked until the transaction ends."""
    row = (
        await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM reconciler.dead_letters "  # noqa: S608 - constants
                "WHERE id = :id FOR UPDATE"
            ),
            {"id": letter_id},
        )
    ).first()
    return None if row is None else _letter(row)


async def mark_replayed(
    conn: AsyncConnection, letter_id: int, operator: str, note: str | None
) -> DeadLetter:
    row = (
        await conn.execute(
            text(
                "UPDATE reconciler.dead_letters SET replayed_at = now(), "  # noqa: S608
                f"replayed_by = :who, replay_note = :note WHERE id = :id RETURNING {_COLUMNS}"
            ),
            {"id": letter_id, "who": operator, "note": note},
        )
    ).one()
    return _letter(row)


def _letter(row: Any) -> DeadLetter:
    values = dict(row._mapping)
    values["body"] = bytes(values["body"])
    return DeadLetter(**values)
