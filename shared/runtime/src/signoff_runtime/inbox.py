"""The idempotent consumer's tracking table.

A consumer records a message's dedup key in the same transaction as the message's effect; a
redelivered message finds its key and changes nothing. The stored ``result`` lets request-reply
handlers answer a replay with the reply they gave the first time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, Table, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_runtime import hot


def inbox_table(metadata: MetaData, schema: str) -> Table:
    return Table(
        "inbox",
        metadata,
        Column("message_id", Text, primary_key=True),
        Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("result", JSONB),
        schema=schema,
    )


async def first_delivery(
    conn: AsyncConnection, table: Table, message_id: str, result: Any = None
) -> bool:
    """Record ``message_id``; ``False`` if it was already recorded (a duplicate). Fixed SQL run
    by asyncpg (``signoff_runtime.hot``): every approval command and reconciliation runs it."""
    sql = (
        f"INSERT INTO {table.schema}.inbox (message_id, result) "  # noqa: S608
        "VALUES ($1, $2::jsonb) ON CONFLICT DO NOTHING RETURNING 1"
    )
    return await hot.fetchrow(conn, sql, message_id, hot.json_param(result)) is not None


async def first_deliveries(
    conn: AsyncConnection, table: Table, message_ids: Sequence[str]
) -> set[str]:
    """Record each of ``message_ids`` (one statement, for a batch); the ones recorded now — the
    others were already recorded (duplicates). Fixed SQL run by asyncpg, as ``first_delivery``:
    the agent runs it for every batch of events."""
    sql = (
        f"INSERT INTO {table.schema}.inbox (message_id) "
        "SELECT unnest($1::text[]) ON CONFLICT DO NOTHING RETURNING message_id"
    )
    rows = await hot.fetch(conn, sql, list(dict.fromkeys(message_ids)))
    return {row["message_id"] for row in rows}


async def stored_result(conn: AsyncConnection, table: Table, message_id: str) -> Any:
    row = await conn.execute(
        text(f"SELECT result FROM {table.schema}.inbox WHERE message_id = :mid"),  # noqa: S608
        {"mid": message_id},
    )
    return row.scalar_one_or_none()


async def store_result(conn: AsyncConnection, table: Table, message_id: str, result: Any) -> None:
    """Keep ``result`` beside ``message_id`` (the reply a replay is answered with). Fixed SQL run
    by asyncpg (``signoff_runtime.hot``), as ``first_delivery``."""
    sql = f"UPDATE {table.schema}.inbox SET result = $2::jsonb WHERE message_id = $1"  # noqa: S608
    await hot.execute(conn, sql, message_id, json.dumps(result))
