"""The transactional outbox: where a service writes the messages its state changes cause.

A state change and the messages it must cause are written in one transaction — in one statement
where the writer has the change at hand: ``enqueue_statement`` (or ``enqueue_hot``, the same
statement as fixed SQL for the hot paths) is the only place outbox rows are made — both from
``_row`` — and every service writes through it. The statement also sends a ``NOTIFY`` (delivered at
commit) that wakes the relay (``signoff_runtime.relay``), which publishes the rows.

A writer inside a unit of work whose own process runs a relay on the same table (every service
publishes its own outbox) hands that relay the rows it wrote once the commit answered, and sends
no ``NOTIFY``: the relay publishes them at once, without a round through PostgreSQL's listener
nor reading them back, and marks them sent after the confirm as always; the relays of other
processes on the same table (executor replicas) are not woken for rows that are not theirs.
Should the writer die between its commit and the hand-over, its rows wait for a relay's poll (a
second by default): later, never lost. Should another relay's poll take a handed-over row before
it is marked sent, the message goes out twice, and its consumer drops the copy by
``message_id``.

(A little over 300 lines: the one statement exists twice — as a SQLAlchemy construct and as
fixed SQL for the hot paths — and both must stay beside the one row builder they share.)
"""

from __future__ import annotations

import asyncio
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

from signoff_runtime import hot, tracing, unit_of_work
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


#: a relay's door for rows this process committed: it publishes them without reading them back
Offer = Callable[[list[dict[str, Any]]], None]
#: the relays running in this process, by database and ``NOTIFY`` channel (``local_relay``)
_LOCAL_RELAYS: dict[tuple[str, str], list[Offer]] = {}


def _key(url: Any, table: Table) -> tuple[str, str]:
    return url.render_as_string(hide_password=True), notify_channel(table)


def local_relay(url: Any, table: Table, offer: Offer) -> Callable[[], None]:
    """Register a relay of this process on ``table`` of the database at ``url``: a writer in a
    unit of work hands it the rows it wrote (with their ids) once its commit answered. Returns
    the call that unregisters it."""
    offers = _LOCAL_RELAYS.setdefault(_key(url, table), [])
    offers.append(offer)
    return lambda: offers.remove(offer)


def _local(conn: AsyncConnection, table: Table) -> tuple[unit_of_work.UnitOfWork, Offer] | None:
    """The unit of work ``conn`` belongs to and the relay here to hand its rows to, or ``None``
    (no unit of work, or no relay in this process: the statement's ``NOTIFY`` wakes one)."""
    uow = unit_of_work.current(conn)
    offers = _LOCAL_RELAYS.get(_key(conn.engine.url, table))
    return (uow, offers[0]) if uow is not None and offers else None


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
    notify: bool = True,
) -> Executable:
    """ONE statement: ``change`` (the state change the messages announce, an INSERT or UPDATE
    run as a ``WITH`` part), the messages' outbox rows, and a ``NOTIFY`` to the relay if a row
    was written — so a state change and its messages cannot be committed one without the other,
    and cost one round trip. Without ``notify`` it answers the written rows' ``id, message_id``
    instead (for a relay of the writer's own process).

    A message id already in the outbox is left alone, or with ``resend`` marked unsent again
    (the same message published once more, under its own id).
    """
    return _statement(table, [_row(out) for out in messages], change, resend, notify)


def _statement(
    table: Table,
    rows: list[dict[str, Any]],
    change: UpdateBase | None,
    resend: bool,
    notify: bool,
) -> Executable:
    if not rows:
        assert change is not None, "nothing to write"
        return change
    insert = insert_rows(table, rows)
    if resend:
        insert = insert.on_conflict_do_update(
            index_elements=[table.c.message_id], set_={"sent_at": None, "available_at": func.now()}
        )
    else:
        insert = insert.on_conflict_do_nothing(index_elements=[table.c.message_id])
    written = insert.returning(table.c.id, table.c.message_id).cte("written")
    if notify:
        statement = select(func.pg_notify(notify_channel(table), "")).select_from(written).limit(1)
    else:  # the rows written (a conflicting id left alone is not among them)
        statement = select(written.c.id, written.c.message_id)
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
    round trip (``enqueue_statement``); a relay of this process is handed the rows after the
    commit, else the ``NOTIFY`` wakes one. With ``hold`` (a negative control) no row is
    written: the change runs alone and each message is handed to ``hold``."""
    if hold is not None:
        if change is not None:
            await conn.execute(change)
        for out in messages:
            hold(out)
        return
    made = [_row(out) for out in messages]
    local = _local(conn, table) if made else None
    result = await conn.execute(_statement(table, made, change, resend, notify=local is None))
    if local is not None:
        _hand_over(local, made, [(row.id, row.message_id) for row in result])


def _hand_over(
    local: tuple[unit_of_work.UnitOfWork, Offer],
    made: list[dict[str, Any]],
    written: Sequence[tuple[int, str]],
) -> None:
    """Once the commit answered, give this process's relay the rows just ``written``
    (``id, message_id``; a conflicting id left alone is not among them)."""
    uow, offer = local
    ids = {message_id: row_id for row_id, message_id in written}
    rows = [{**row, "id": ids[row["message_id"]]} for row in made if row["message_id"] in ids]

    async def hand_over() -> None:
        offer(rows)
        # let the relay publish before the writer carries on (its answer, its ack, its log
        # line): the messages are what the next hop waits for. Three turns of the loop: the
        # relay starts the round, the round's publishes put their frames on aiormq's write
        # queue, the connection's writer task writes them (with two, the writer's own next
        # step ran first: ≈ 1 ms of an HTTP answer before the contract left)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    if rows:
        uow.after_commit(hand_over)


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
def _hot_sql(
    schema: str, name: str, change: str | None, after: int, resend: bool, notify: bool
) -> str:
    """``enqueue_statement`` as constant text: the change's SQL, then one array per outbox column
    (parameters ``$after+1``…) — the same text for any number of messages."""
    columns = ", ".join(c for c, _ in _HOT_COLUMNS)
    arrays = ", ".join(f"${after + i}::{t}[]" for i, (_, t) in enumerate(_HOT_COLUMNS, 1))
    conflict = "DO UPDATE SET sent_at = NULL, available_at = now()" if resend else "DO NOTHING"
    head = f"WITH change AS ({change}), " if change is not None else "WITH "
    return (
        f"{head}written AS (INSERT INTO {schema}.{name} ({columns}) "  # noqa: S608 - constant
        f"SELECT * FROM unnest({arrays}) ON CONFLICT (message_id) {conflict} "
        "RETURNING id, message_id) "
        + (
            f"SELECT pg_notify('{schema}_{name}', '') FROM written LIMIT 1"  # noqa: S608
            if notify
            else "SELECT id, message_id FROM written"
        )
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
    call. ``change`` is fixed SQL with its parameters (``Change``). Like ``enqueue``, it hands
    the rows to a relay of this process after the commit, or sends the ``NOTIFY``."""
    if not messages:
        assert change is not None, "nothing to write"
        await hot.execute(conn, change.sql, *change.args)
        return
    assert table.schema is not None and notify_channel(table) == f"{table.schema}_{table.name}"
    rows = [_row(out) for out in messages]
    arrays = [[r[c] for r in rows] for c, _ in _HOT_COLUMNS]
    arrays[-1] = [json.dumps(h) for h in arrays[-1]]  # jsonb as text (hot.json_param)
    local = _local(conn, table)
    sql = _hot_sql(
        table.schema,
        table.name,
        None if change is None else change.sql,
        0 if change is None else len(change.args),
        resend,
        notify=local is None,
    )
    written = await hot.fetch(conn, sql, *(() if change is None else change.args), *arrays)
    if local is not None:
        _hand_over(local, rows, [(r["id"], r["message_id"]) for r in written])
