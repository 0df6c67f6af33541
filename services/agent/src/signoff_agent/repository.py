"""SQL for conversations, messages, cards, notes and the journal.

Every write that a conversation's event stream must see appends to ``journal`` and notifies
channel ``agent_conversations`` in the same transaction (the notification fires at commit).
Writers lock the conversation row first (``lock``, or the ``UPDATE`` of a turn claim), so one
conversation's journal rows commit in ``seq`` order and a reader that remembers the last ``seq``
it saw never skips one.

Most statements are SQLAlchemy Core. The ones every proposal event runs (the hand-back's) are hot
statements (``signoff_runtime.hot``: fixed SQL, prepared once per connection), each write folded
with its journal row and its notification into one statement: ``lock_with_card``,
``upsert_card``, ``hand_back`` and ``append_journal``. An outcome is three statements, not nine.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from signoff_contracts.ids import new_id
from signoff_runtime import hot
from sqlalchemy import Row, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_agent.tables import (
    SCHEMA,
    cards,
    conversations,
    journal,
    messages,
    notes,
    propose_keys,
)

CHANNEL = "agent_conversations"


async def create_conversation(
    conn: AsyncConnection, organization_id: str, user_id: str, section: str, resource_id: str
) -> Row[Any]:
    row: Row[Any] = (
        await conn.execute(
            conversations.insert()
            .values(
                id=new_id("cnv"),
                organization_id=organization_id,
                created_by=user_id,
                section=section,
                resource_id=resource_id,
            )
            .returning(conversations)
        )
    ).one()
    return row


async def get(conn: AsyncConnection, conversation_id: str) -> Row[Any] | None:
    query = select(conversations).where(conversations.c.id == conversation_id)
    return (await conn.execute(query)).first()


async def lock(conn: AsyncConnection, conversation_id: str) -> Row[Any] | None:
    query = select(conversations).where(conversations.c.id == conversation_id).with_for_update()
    return (await conn.execute(query)).first()


async def lock_with_card(
    conn: AsyncConnection, conversation_id: str, card_id: str
) -> hot.Fields | None:
    """``lock`` and ``card`` in one statement: the conversation's ``id`` and
    ``organization_id``, locked, and ``card_status``, the status of card ``card_id`` (``None``
    while it is unknown). A hand-back's first statement, for every event."""
    row = await hot.fetchrow(conn, _LOCK_WITH_CARD, conversation_id, card_id)
    return None if row is None else hot.Fields(row)


_LOCK_WITH_CARD = (
    f"SELECT c.id, c.organization_id, k.status AS card_status FROM {SCHEMA}.conversations c "  # noqa: S608
    f"LEFT JOIN {SCHEMA}.cards k ON k.id = $2 WHERE c.id = $1 FOR UPDATE OF c"
)


async def claim_turn(
    conn: AsyncConnection, conversation_id: str, turn_id: str, lease_s: float, *, pending: bool
) -> Row[Any] | None:
    """Take the conversation's turn lease if it is free (or lapsed); ``pending`` claims only a
    conversation that has a trigger waiting. Clears the trigger: this turn answers it."""
    c = conversations.c
    free = (c.turn_id.is_(None)) | (c.turn_expires_at < func.now())
    condition = (c.id == conversation_id) & free
    if pending:
        condition = condition & c.pending_trigger.is_not(None)
    query = (
        update(conversations)
        .where(condition)
        .values(
            turn_id=turn_id,
            turn_expires_at=func.now() + func.make_interval(0, 0, 0, 0, 0, 0, lease_s),
            pending_trigger=None,
        )
        .returning(conversations)
    )
    claimed: Row[Any] | None = (await conn.execute(query)).first()
    return claimed


async def release_turn(conn: AsyncConnection, conversation_id: str, turn_id: str) -> bool:
    """Free the lease; ``True`` if a trigger arrived meanwhile and needs another turn."""
    c = conversations.c
    row = (
        await conn.execute(
            update(conversations)
            .where(c.id == conversation_id, c.turn_id == turn_id)
            .values(turn_id=None, turn_expires_at=None)
            .returning(c.pending_trigger)
        )
    ).first()
    return row is not None and row.pending_trigger is not None


async def set_pending_trigger(conn: AsyncConnection, conversation_id: str, message_id: str) -> None:
    await conn.execute(
        update(conversations)
        .where(conversations.c.id == conversation_id)
        .values(pending_trigger=message_id)
    )


async def last_resolution(conn: AsyncConnection, conversation_id: str) -> str | None:
    """The pause point whose resolution is the conversation's newest (an event-started turn's
    reason to run): the proposals service identifies the person from it."""
    m = messages.c
    row = (
        await conn.execute(
            select(m.pause_point_id)
            .where(m.conversation_id == conversation_id, m.kind == "resolution")
            .order_by(m.seq.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else row.pause_point_id


async def waiting_conversations(conn: AsyncConnection, limit: int = 20) -> list[str]:
    c = conversations.c
    rows = await conn.execute(
        select(c.id)
        .where(
            c.pending_trigger.is_not(None),
            (c.turn_id.is_(None)) | (c.turn_expires_at < func.now()),
        )
        .limit(limit)
    )
    return [r.id for r in rows]


async def add_message(
    conn: AsyncConnection, conversation_id: str, **values: Any
) -> Row[Any] | None:
    """Insert a message (``None`` if its ``(proposal|pause_point, kind)`` already exists)."""
    row: Row[Any] | None = (
        await conn.execute(
            insert(messages)
            .values(id=new_id("msg"), conversation_id=conversation_id, **values)
            .on_conflict_do_nothing()
            .returning(messages)
        )
    ).first()
    if row is not None:
        await append_journal(conn, conversation_id, "message", row.id)
    return row


async def hand_back(
    conn: AsyncConnection,
    conversation_id: str,
    proposal_id: str,
    kind: str,
    code: str,
    params: dict[str, Any],
    note: str | None = None,
) -> bool:
    """``add_message`` of an app-authored message about a proposal (and, when ``note`` is given,
    a note with the same ``params`` for the next turn) in one statement; ``False``, writing
    nothing, if its ``(proposal, kind)`` already exists."""
    row = await hot.fetchrow(
        conn,
        _HAND_BACK,
        new_id("msg"),
        conversation_id,
        code,
        hot.json_param(params),
        proposal_id,
        kind,
        note,
    )
    return row is not None


#: the message, and only if it was new: its journal row, its note and the notification
_HAND_BACK = (
    f"WITH m AS (INSERT INTO {SCHEMA}.messages "  # noqa: S608
    "(id, conversation_id, role, code, params, proposal_id, kind) "
    "VALUES ($1, $2, 'app', $3, $4::jsonb, $5, $6) ON CONFLICT DO NOTHING RETURNING id), "
    f"j AS (INSERT INTO {SCHEMA}.journal (conversation_id, kind, ref) "
    "SELECT $2, 'message', m.id FROM m), "
    f"n AS (INSERT INTO {SCHEMA}.notes (conversation_id, proposal_id, code, params) "
    "SELECT $2, $5, $7::text, $4::jsonb FROM m WHERE $7::text IS NOT NULL) "
    f"SELECT m.id, pg_notify('{CHANNEL}', $2) FROM m"
)


async def handed_back(
    conn: AsyncConnection,
    kind: str,
    *,
    proposal_id: str | None = None,
    pause_point_id: str | None = None,
) -> Row[Any] | None:
    """The message of ``kind`` already written about a proposal or a pause point."""
    m = messages.c
    ref = m.proposal_id == proposal_id if proposal_id else m.pause_point_id == pause_point_id
    return (await conn.execute(select(messages).where(ref, m.kind == kind))).first()


async def message(conn: AsyncConnection, message_id: str) -> Row[Any] | None:
    return (await conn.execute(select(messages).where(messages.c.id == message_id))).first()


async def all_messages(conn: AsyncConnection, conversation_id: str) -> Sequence[Row[Any]]:
    query = select(messages).where(messages.c.conversation_id == conversation_id)
    return (await conn.execute(query.order_by(messages.c.seq))).all()


async def recent_messages(
    conn: AsyncConnection, conversation_id: str, limit: int
) -> list[Row[Any]]:
    query = (
        select(messages)
        .where(messages.c.conversation_id == conversation_id)
        .order_by(messages.c.seq.desc())
        .limit(limit)
    )
    return list(reversed((await conn.execute(query)).all()))


async def upsert_card(
    conn: AsyncConnection,
    card_id: str,
    conversation_id: str,
    type_: str,
    status: str,
    *,
    keep_existing: bool = False,
    **extra: Any,
) -> None:
    """Record a card's latest status; ``keep_existing`` only adds a card not yet known (a turn
    must not set back a status an event already moved on). With its journal row and
    notification, in one statement."""
    names = tuple(sorted(extra))
    sql = _card_sql(names, keep_existing)
    await hot.execute(
        conn, sql, card_id, conversation_id, type_, status, *(extra[n] for n in names)
    )


#: what ``upsert_card`` may set besides the status
_CARD_EXTRA = frozenset({"operation_kind", "replaced_by", "replaces"})


@cache
def _card_sql(names: tuple[str, ...], keep_existing: bool) -> str:
    """``upsert_card``'s statement for the extra columns ``names`` (sorted)."""
    unknown = set(names) - _CARD_EXTRA
    if unknown:
        raise TypeError(f"upsert_card: not a card column: {', '.join(sorted(unknown))}")
    columns = ", ".join(("id", "conversation_id", "type", "status", *names, "updated_at"))
    values = ", ".join([*(f"${i}" for i in range(1, 5 + len(names))), "now()"])
    changed = ", ".join(f"{c} = EXCLUDED.{c}" for c in ("status", *names, "updated_at"))
    conflict = "DO NOTHING" if keep_existing else f"DO UPDATE SET {changed}"
    return (
        f"WITH c AS (INSERT INTO {SCHEMA}.cards ({columns}) VALUES ({values}) "  # noqa: S608
        f"ON CONFLICT (id) {conflict}), "
        f"j AS (INSERT INTO {SCHEMA}.journal (conversation_id, kind, ref) VALUES ($2, 'card', $1)) "
        f"SELECT pg_notify('{CHANNEL}', $2)"
    )


async def card(conn: AsyncConnection, card_id: str) -> Row[Any] | None:
    return (await conn.execute(select(cards).where(cards.c.id == card_id))).first()


async def cards_of(conn: AsyncConnection, conversation_id: str) -> Sequence[Row[Any]]:
    query = select(cards).where(cards.c.conversation_id == conversation_id)
    return (await conn.execute(query.order_by(cards.c.updated_at))).all()


async def open_notes(conn: AsyncConnection, conversation_id: str, limit: int) -> Sequence[Row[Any]]:
    query = (
        select(notes)
        .where(notes.c.conversation_id == conversation_id, notes.c.consumed_by.is_(None))
        .order_by(notes.c.id.desc())
        .limit(limit)
    )
    return (await conn.execute(query)).all()


async def consume_notes(conn: AsyncConnection, note_ids: Sequence[int], turn_id: str) -> None:
    if note_ids:
        await conn.execute(
            update(notes)
            .where(notes.c.id.in_(list(note_ids)), notes.c.consumed_by.is_(None))
            .values(consumed_by=turn_id)
        )


async def append_journal(conn: AsyncConnection, conversation_id: str, kind: str, ref: str) -> None:
    await hot.execute(conn, _JOURNAL, conversation_id, kind, ref)


_JOURNAL = (
    f"WITH j AS (INSERT INTO {SCHEMA}.journal (conversation_id, kind, ref) "  # noqa: S608
    f"VALUES ($1, $2, $3)) SELECT pg_notify('{CHANNEL}', $1)"
)


async def journal_after(
    conn: AsyncConnection, conversation_id: str, after_seq: int, limit: int = 200
) -> Sequence[Row[Any]]:
    query = (
        select(journal)
        .where(journal.c.conversation_id == conversation_id, journal.c.seq > after_seq)
        .order_by(journal.c.seq)
        .limit(limit)
    )
    return (await conn.execute(query)).all()


async def last_journal_seq(conn: AsyncConnection, conversation_id: str) -> int:
    query = select(func.coalesce(func.max(journal.c.seq), 0)).where(
        journal.c.conversation_id == conversation_id
    )
    return int((await conn.execute(query)).scalar_one())


async def keyed_proposal(
    conn: AsyncConnection, organization_id: str, user_id: str, key: str, digest: str
) -> tuple[str, str]:
    """The proposal id ``key`` stands for and the digest it was first used with: a fresh id on
    first use, the first use's id on every later one (concurrent first uses agree)."""
    fresh = new_id("prp")
    await conn.execute(
        insert(propose_keys)
        .values(
            organization_id=organization_id,
            user_id=user_id,
            key=key,
            proposal_id=fresh,
            digest=digest,
        )
        .on_conflict_do_nothing()
    )
    row = (
        await conn.execute(
            select(propose_keys.c.proposal_id, propose_keys.c.digest).where(
                propose_keys.c.organization_id == organization_id,
                propose_keys.c.user_id == user_id,
                propose_keys.c.key == key,
            )
        )
    ).one()
    return str(row.proposal_id), str(row.digest)
