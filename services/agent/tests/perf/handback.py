"""Hot statements, the agent's: the CPU a proposal's two events cost this process when they are
handed back (issue 18).

``.venv/bin/python services/agent/tests/perf/handback.py`` makes a fresh database and runs, in one
process, ``BENCH_N`` proposals (default 400) through each path side by side, alternating,
``BENCH_REPEATS`` rounds (default 3) after one warm-up round each (the harness:
``signoff_runtime.testing.cpu``). Printed: the median process CPU per proposal (this process's,
the database's not included) and wall time. A proposal is what the agent's consumer does for the
two events every approved proposal sends it, each in a transaction of its own as at low load:
``executing`` (the card's status) and ``outcome`` (the card, the message and its note), each
with its inbox row (``inbox.first_deliveries``).

- ``core``: the statements as they were, SQLAlchemy Core (copied below): the conversation
  locked, the card read, the card upserted, its journal row and ``pg_notify``, the message, its
  journal row and ``pg_notify``, the note — nine statements for an outcome, five for ``executing``;
- ``hot``: ``handback.apply`` as it is — three statements and two, each a hot statement.

It calls the service's internals, so it lives with the service's tests (``bench/`` measures
through the public interfaces only); not a test module, pytest does not collect it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from signoff_agent import handback
from signoff_agent.tables import cards, conversations, inbox, journal, messages, notes
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import ProposalEvent, ProposalView
from signoff_runtime.inbox import first_deliveries
from signoff_runtime.testing import cpu
from signoff_runtime.testing.cpu import Unit, Workload
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import insert, select, text
from sqlalchemy.dialects.postgresql import insert as upsert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

ORG = "org_bench"


def _events(conversation: str, i: int) -> tuple[ProposalEvent, ProposalEvent]:
    now = datetime.now(UTC)
    view = ProposalView(
        id=f"prp_{conversation.removeprefix('cnv_')}x{i}",
        organization_id=ORG,
        requested_by="usr_bench",
        conversation_id=conversation,
        section="email",
        resource_id="brc_bench",
        operation_kind="email_broadcast.apply_draft",
        contract_version=1,
        preview={},
        status="executing",
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )
    done = view.model_copy(
        update={"status": "succeeded", "outcome": Succeeded(result={"broadcast_id": "brc", "i": i})}
    )
    return (
        ProposalEvent(event="executing", proposal=view, source="proposals"),
        ProposalEvent(event="outcome", proposal=done, source="proposals"),
    )


async def _core_journal(conn: AsyncConnection, conversation_id: str, kind: str, ref: str) -> None:
    await conn.execute(insert(journal).values(conversation_id=conversation_id, kind=kind, ref=ref))
    await conn.execute(
        text("SELECT pg_notify(:channel, :cid)"),
        {"channel": "agent_conversations", "cid": conversation_id},
    )


async def _core_apply(conn: AsyncConnection, event: ProposalEvent) -> bool:
    """``handback.apply`` with the statements as they were, for a proposal that is no revision."""
    view = event.proposal
    assert view.conversation_id is not None
    query = select(conversations).where(conversations.c.id == view.conversation_id)
    conversation = (await conn.execute(query.with_for_update())).first()
    assert conversation is not None
    await conn.execute(select(cards).where(cards.c.id == view.id))
    values: dict[str, Any] = {
        "status": view.status,
        "updated_at": text("now()"),
        "operation_kind": view.operation_kind,
    }
    await conn.execute(
        upsert(cards)
        .values(id=view.id, conversation_id=conversation.id, type="proposal", **values)
        .on_conflict_do_update(index_elements=[cards.c.id], set_=values)
    )
    await _core_journal(conn, conversation.id, "card", view.id)
    written = False
    for notice in handback.plan(event):
        row = (
            await conn.execute(
                upsert(messages)
                .values(
                    id=new_id("msg"),
                    conversation_id=conversation.id,
                    role="app",
                    code=notice.code,
                    params=notice.params,
                    proposal_id=view.id,
                    kind=notice.kind,
                )
                .on_conflict_do_nothing()
                .returning(messages)
            )
        ).first()
        if row is not None:
            written = True
            await _core_journal(conn, conversation.id, "message", row.id)
            if notice.note:
                await conn.execute(
                    insert(notes).values(
                        conversation_id=conversation.id,
                        proposal_id=view.id,
                        code=notice.note,
                        params=notice.params,
                    )
                )
    return written


async def _core_first(conn: AsyncConnection, message_ids: list[str]) -> set[str]:
    rows = await conn.execute(
        text(
            "INSERT INTO agent.inbox (message_id) "
            "SELECT unnest(CAST(:mids AS text[])) ON CONFLICT DO NOTHING RETURNING message_id"
        ),
        {"mids": message_ids},
    )
    return {row.message_id for row in rows}


def _path(engine: AsyncEngine, conversation: str, core: bool, total: int) -> Unit:
    events = [_events(conversation, i) for i in range(total)]  # made beforehand: not measured

    async def unit(i: int) -> None:
        for event in events[i]:
            async with unit_of_work(engine) as tx:
                if core:
                    assert await _core_first(tx.conn, [event.message_id])
                    written = await _core_apply(tx.conn, event)
                else:
                    assert await first_deliveries(tx.conn, inbox, [event.message_id])
                    written = await handback.apply(tx.conn, event)
                assert written is (event.event == "outcome")

    return unit


async def workloads(engine: AsyncEngine, url: str, total: int) -> list[Workload]:
    paths: dict[str, Unit] = {}
    async with engine.begin() as conn:
        for name in ("core", "hot"):
            conversation = f"cnv_{name}"
            await conn.execute(
                insert(conversations).values(
                    id=conversation,
                    organization_id=ORG,
                    created_by="usr_bench",
                    section="email",
                    resource_id="brc_bench",
                )
            )
            paths[name] = _path(engine, conversation, name == "core", total)
    return [Workload("agent.handback", paths)]


if __name__ == "__main__":
    asyncio.run(cpu.run(workloads))
