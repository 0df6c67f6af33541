"""Events handed back a batch at a time (``signoff_runtime.batching``) by the running agent.

Which transaction recorded an event is its inbox row's ``xmin``. To know which events arrive
together, a test holds the lock of a "gate" conversation: the gate's event blocks its batch in
the database, the events sent meanwhile wait behind it (``signoff_consumer_batch_waiting``), and
releasing the lock lets them through as one batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
import httpx
import pytest
from agent_testkit import auth
from faststream.rabbit import RabbitBroker
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ProposalEvent, ProposalView
from signoff_runtime.metrics import BATCH_WAITING, BATCHES_SPLIT
from signoff_runtime.settings import broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
QUEUE = "agent.events"


async def _conversation(agent: httpx.AsyncClient, club: dict[str, Any]) -> str:
    opened = await agent.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    assert opened.status_code in (200, 201), opened.text
    return str(opened.json()["id"])


def _created(club: dict[str, Any], conversation: str) -> ProposalEvent:
    """``proposal.created`` of a new proposal in ``conversation``: it writes the card."""
    now = datetime.now(UTC)
    view = ProposalView(
        id=new_id("prp"),
        organization_id=club["id"],
        requested_by=club["users"]["manager"]["id"],
        conversation_id=conversation,
        section="orders",
        resource_id=club["refund_case"]["order_id"],
        operation_kind="payment.refund",
        contract_version=1,
        preview={},
        status="pending",
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )
    return ProposalEvent(event="created", proposal=view, source="proposals")


async def _publish(amqp_url: str, topology: Topology, body: ProposalEvent | bytes) -> None:
    raw = body if isinstance(body, bytes) else body.model_dump_json().encode()
    message_id = new_id("msg") if isinstance(body, bytes) else body.message_id
    async with RabbitBroker(amqp_url) as broker:
        await broker.publish(
            raw,
            exchange=topology.exchange("conversation-events"),
            routing_key="proposal.created",
            message_id=message_id,
            content_type="application/json",
            user_id=broker_user(amqp_url),
        )


@contextlib.asynccontextmanager
async def _gate(
    engine: AsyncEngine, club: dict[str, Any], gate: str, amqp_url: str, topology: Topology
) -> AsyncIterator[None]:
    """Hold the gate conversation's lock; its event's batch blocks on it until the block ends."""
    async with engine.connect() as conn:
        held = await conn.begin()
        await conn.execute(
            text("SELECT 1 FROM agent.conversations WHERE id = :i FOR UPDATE"), {"i": gate}
        )
        try:
            await _publish(amqp_url, topology, _created(club, gate))

            async def blocked() -> bool:
                async with engine.connect() as probe:
                    found = await probe.execute(
                        text(
                            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock'"
                        )
                    )
                    return found.first() is not None

            await wait_until(blocked, what="the gate's batch to block")
            yield
        finally:
            await held.rollback()


async def _waiting(count: int) -> None:
    async def probe() -> bool:
        return BATCH_WAITING.labels(queue=QUEUE)._value.get() == count

    await wait_until(probe, what=f"{count} events waiting for the gate's batch")


async def _cards(engine: AsyncEngine, proposal_ids: list[str]) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT proposal_id, count(*) AS n FROM agent.messages "
                "WHERE proposal_id = ANY(:p) AND code = 'proposal_ready' GROUP BY proposal_id"
            ),
            {"p": proposal_ids},
        )
        return {row.proposal_id: row.n for row in rows}


async def _writers(engine: AsyncEngine, message_ids: list[str]) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT xmin::text AS tx FROM agent.inbox WHERE message_id = ANY(:m)"),
            {"m": message_ids},
        )
        return [row.tx for row in rows]


async def test_events_that_arrive_together_are_handed_back_in_one_transaction_once_each(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
) -> None:
    gate, one, two = [await _conversation(agent, club) for _ in range(3)]
    events = [_created(club, one), _created(club, two), _created(club, one)]
    sent = [events[0], events[1], events[0], events[2]]  # the first twice: a redelivered copy
    async with _gate(engine, club, gate, amqp_url, topology):
        for event in sent:
            await _publish(amqp_url, topology, event)
        await _waiting(len(sent))
    proposal_ids = [e.proposal.id for e in events]

    async def handed_back() -> bool:
        return len(await _cards(engine, proposal_ids)) == len(events)

    await wait_until(handed_back, what="a card for each proposal")
    assert await _cards(engine, proposal_ids) == {pid: 1 for pid in proposal_ids}
    writers = await _writers(engine, [e.message_id for e in events])
    assert len(writers) == 3 and len(set(writers)) == 1  # one transaction recorded them all


async def test_an_event_that_does_not_parse_is_dead_lettered_and_its_neighbours_handed_back(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
) -> None:
    gate, one = await _conversation(agent, club), await _conversation(agent, club)
    good = [_created(club, one), _created(club, one)]
    split = BATCHES_SPLIT.labels(queue=QUEUE)._value.get()
    async with _gate(engine, club, gate, amqp_url, topology):
        await _publish(amqp_url, topology, good[0])
        await _publish(amqp_url, topology, b"not an event")
        await _publish(amqp_url, topology, good[1])
        await _waiting(3)
    proposal_ids = [e.proposal.id for e in good]

    async def handed_back() -> bool:
        return len(await _cards(engine, proposal_ids)) == len(good)

    await wait_until(handed_back, what="the neighbours' cards")
    assert BATCHES_SPLIT.labels(queue=QUEUE)._value.get() == split + 1

    connection = await aio_pika.connect(amqp_url)
    async with connection:
        dlq = await (await connection.channel()).get_queue(topology.dlq(QUEUE))

        async def dead_lettered() -> Any:
            return await dlq.get(no_ack=True, fail=False)

        letter = await wait_until(dead_lettered, what="the dead letter")
    assert letter.headers["x-signoff-reason"] == "invalid_message"
    assert letter.body == b"not an event"
