"""The agent's AMQP consumer: proposal and pause-point events, handed back to conversations.

Its queue hears only the events of proposals and pause points that belong to a conversation
(``conversation-events``, ``docs/topology.md``): a proposal made through the machine-facing
endpoint has nothing to hand back, so its events never come here.

It consumes through ``signoff_runtime.batching.consume_batched``: the events waiting together
(at most ``SIGNOFF_AMQP__BATCH_SIZE``) are handed back in one transaction and acknowledged after
it committed; a batch that fails is handled again event by event through ``settle``, so an event
that does not parse, or cannot be handed back, is dead-lettered with a reason and its neighbours
are not. Events are deduplicated by ``message_id`` in the inbox, in the transaction that writes
their messages (one statement for the batch; a second copy in the same batch is a duplicate).
A batch's events are applied conversation by conversation (each conversation's in the order they
came), so two batches take the conversations' locks in the same order.
(The agent answers no requests: revisions are resolved by the proposals service.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import structlog
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from signoff_contracts.v1 import PausePointResolved, ProposalEvent
from signoff_runtime.batching import consume_batched
from signoff_runtime.consumer import PermanentError
from signoff_runtime.inbox import first_deliveries
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import UnitOfWork
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_agent import handback
from signoff_agent.metrics import HANDBACKS
from signoff_agent.tables import inbox
from signoff_agent.turns import Turns

log = structlog.get_logger(__name__)

Event = ProposalEvent | PausePointResolved


@dataclass
class Consumers:
    engine: AsyncEngine
    broker: RabbitBroker
    topology: Topology
    amqp: AmqpSettings
    turns: Turns
    senders: Senders

    def register(self) -> None:
        consume_batched(
            self.broker,
            self.topology,
            self.senders,
            "agent.events",
            self.events,
            engine=self.engine,
            prefetch=self.amqp.prefetch,
            size=self.amqp.batch_size,
        )

    async def events(self, tx: UnitOfWork, msgs: Sequence[RabbitMessage]) -> None:
        """Hand back a batch of events on ``tx`` (a duplicate writes nothing)."""
        events = [e for e in (parse(msg.body) for msg in msgs) if e is not None]
        fresh = await first_deliveries(tx.conn, inbox, [e.message_id for e in events])
        for event in sorted(events, key=_conversation):  # stable: in order within each
            first = event.message_id in fresh
            fresh.discard(event.message_id)  # a second copy in this batch is a duplicate
            if isinstance(event, ProposalEvent):
                await self.proposal_event(tx, event, first)
            else:
                await self.pause_point_resolved(tx, event, first)

    async def proposal_event(self, tx: UnitOfWork, event: ProposalEvent, first: bool) -> None:
        written = "duplicate"
        if first:
            applied = await handback.apply(tx.conn, event, self.turns.directory)
            written = str(applied).lower()
        tx.after_commit(HANDBACKS.labels(event=event.event, written=written).inc)

    async def pause_point_resolved(
        self, tx: UnitOfWork, event: PausePointResolved, first: bool
    ) -> None:
        if not first:
            tx.after_commit(HANDBACKS.labels(event="pause_point", written="duplicate").inc)
            return
        waiting = await handback.apply_pause(tx.conn, event)
        written = str(waiting is not None).lower()
        tx.after_commit(HANDBACKS.labels(event="pause_point", written=written).inc)
        if waiting is not None:
            tx.after_commit(partial(self.turns.resume_soon, waiting))


def parse(body: bytes) -> Event | None:
    """The event ``body`` holds; ``None`` for a type this agent does not read (readers tolerate
    growth). A body that is not an event raises (``PermanentError``, ``ValidationError``)."""
    try:
        kind = json.loads(body).get("type")
    except (ValueError, AttributeError):
        raise PermanentError("invalid_message", "not a JSON object") from None
    if kind == "proposal.event":
        return ProposalEvent.model_validate_json(body)
    if kind == "pause_point.resolved":
        return PausePointResolved.model_validate_json(body)
    log.info("event.ignored", type=str(kind)[:64])
    return None


def _conversation(event: Event) -> str:
    view = event.proposal if isinstance(event, ProposalEvent) else event.pause_point
    return view.conversation_id or ""
