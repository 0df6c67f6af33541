"""The transactional outbox: where a service writes the messages its state changes cause.

A state change and the messages it must cause are written in one transaction — in one statement
where the writer has the change at hand: ``enqueue_statement`` (or ``enqueue_hot``, the same
statement as fixed SQL for the hot paths) is the only place outbox rows are made — both from
``_row`` — and every service writes through it. The statement also sends a ``NOTIFY`` (delivered at
commit) that wakes the relay (``signoff_runtime.relay``), which publishes the rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from signoff_contracts.v1 import Envelope
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import UpdateBase

from signoff_runtime import hot, tracing
from signoff_runtime.bulk import insert_rows


def outbox_table(metadata: MetaData, schema: str) -> Table:
    return Table(
        "outbox",
        metadata,
        Column("id", BigInteger, Identity(), primary_key=True),
        Column("message_id", Text, nullable=False, unique=True),
        Column("exchange", Text, nullable=False),
        Column("routing_key", Text, nullable=False),
        Column("message_type", Text, nullable=False),
        Column("correlation_id", Text),
        Column("body", LargeBinary, nullable=False),
        Column("headers", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("available_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("sent_at", DateTime(timezone=True)),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("last_error", Text),
        Index(f"ix_{schema}_outbox_unsent", "id", postgresql_where=text("sent_at IS NULL")),
        schema=schema,
    )


def notify_channel(table: Table) -> str:
    return f"{table.schema}_outbox"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message for the outbox: the envelope, where the relay publishes it, extra headers
    (the current trace is always added; a header given here wins)."""

    message: Envelope
    exchange: str
    routing_key: str
    headers: Mapping[str, str] | None = None


#: what the negative control ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX`` does with a message
#: instead of writing its row: keep it to publish once the transaction has committed
Hold = Callable[[Outgoing], None]


def _row(out: Outgoing) -> dict[str, Any]:
    """The one place an outbox row is made from a message (a new column is a line here)."""
    return {
        "message_id": out.message.message_id,
        "exchange": out.exchange,
        "routing_key": out.routing_key,
        "message_type": out.message.type,
        "correlation_id": out.message.correlation_id,
        "body": out.message.model_dump_json().encode(),
        "headers": {**tracing.headers(), **dict(out.headers or {})},
    }


def enqueue_statement(
    table: Table,
    messages: Sequence[Outgoing],
    *,
    change: UpdateBase | None = None,
    resend: bool = False,
) -> Executable:
    """ONE statement: ``change`` (the state change the messages announce, an INSERT or UPDATE
    run as a ``WITH`` part), the messages' outbox rows, and a ``NOTIFY`` to the relay if a row
    was written — so a state change and its messages cannot be committed one without the other,
    and cost one round trip.

    A message id already in the outbox is left alone, or with ``resend`` marked unsent again
    (the same message published once more, under its own id).
    """
    if not messages:
        assert change is not None, "nothing to write"
        return change
    insert = insert_rows(table, [_row(out) for out in messages])
    if resend:
        insert = insert.on_conflict_do_update(
            index_elements=[table.c.message_id], set_={"sent_at": None, "available_at": func.now()}
        )
    else:
        insert = insert.on_conflict_do_nothing(index_elements=[table.c.message_id])
    written = insert.returning(table.c.id).cte("written")
    statement = select(func.pg_notify(notify_channel(table), "")).select_from(written).limit(1)
    if change is not None:
        statement = statement.add_cte(change.cte("change"))
    return statement


async def enqueue(
    conn: AsyncConnection,
    table: Table,
    messages: Sequence[Outgoing],
    *,
    change: UpdateBase | None = None,
    resend: bool = False,
    hold: Hold | None = None,
) -> None:
    """Write ``messages`` (and the ``change`` they announce) in the caller's transaction, in one
    round trip (``enqueue_statement``). With ``hold`` (a negative control) no row is written:
    the change runs alone and each message is handed to ``hold``."""
    if hold is not None:
        if change is not None:
            await conn.execute(change)
        for out in messages:
            hold(out)
        return
    await conn.execute(enqueue_statement(table, messages, change=change, resend=resend))


@dataclass(frozen=True, slots=True)
class Change:
    """A state change for ``enqueue_hot``, as fixed SQL: an INSERT or UPDATE whose parameters
    are ``$1``…``$n`` (``len(args)``), run as a ``WITH`` part of the outbox's statement."""

    sql: str
    args: tuple[Any, ...] = ()


#: the outbox columns ``_row`` fills, with the array type each is bound as
_HOT_COLUMNS = (
    ("message_id", "text"),
    ("exchange", "text"),
    ("routing_key", "text"),
    ("message_type", "text"),
    ("correlation_id", "text"),
    ("body", "bytea"),
    ("headers", "jsonb"),
)


@cache
def _hot_sql(schema: str, name: str, change: str | None, after: int, resend: bool) -> str:
    """``enqueue_statement`` as constant text: the change's SQL, then one array per outbox column
    (parameters ``$after+1``…) — the same text for any number of messages."""
    columns = ", ".join(c for c, _ in _HOT_COLUMNS)
    arrays = ", ".join(f"${after + i}::{t}[]" for i, (_, t) in enumerate(_HOT_COLUMNS, 1))
    conflict = "DO UPDATE SET sent_at = NULL, available_at = now()" if resend else "DO NOTHING"
    head = f"WITH change AS ({change}), " if change is not None else "WITH "
    return (
        f"{head}written AS (INSERT INTO {schema}.{name} ({columns}) "  # noqa: S608 - constant
        f"SELECT * FROM unnest({arrays}) ON CONFLICT (message_id) {conflict} RETURNING id) "
        f"SELECT pg_notify('{schema}_{name}', '') FROM written LIMIT 1"
    )


async def enqueue_hot(
    conn: AsyncConnection,
    table: Table,
    messages: Sequence[Outgoing],
    *,
    change: Change | None = None,
    resend: bool = False,
) -> None:
    """``enqueue`` for a hot path: the same one statement (``enqueue_statement``), as constant
    SQL prepared by asyncpg (``signoff_runtime.hot``) — no construct to compile or cache-key per
    call. ``change`` is fixed SQL with its parameters (``Change``)."""
    if not messages:
        assert change is not None, "nothing to write"
        await hot.execute(conn, change.sql, *change.args)
        return
    assert table.schema is not None and notify_channel(table) == f"{table.schema}_{table.name}"
    rows = [_row(out) for out in messages]
    arrays = [[r[c] for r in rows] for c, _ in _HOT_COLUMNS]
    arrays[-1] = [json.dumps(h) for h in arrays[-1]]  # jsonb as text (hot.json_param)
    sql = _hot_sql(
        table.schema,
        table.name,
        None if change is None else change.sql,
        0 if change is None else len(change.args),
        resend,
    )
    await hot.execute(conn, sql, *(() if change is None else change.args), *arrays)
