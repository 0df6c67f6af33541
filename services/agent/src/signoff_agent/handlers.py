"""The agent's AMQP consumer: proposal and pause-point events, handed back to conversations.

It consumes through ``signoff_runtime.consumer.consume``: acknowledged manually by ``settle``
after its transaction committed, the body parsed here, so a malformed message is dead-lettered
with a reason rather than dropped. Events are deduplicated by ``message_id`` in the inbox, in the
transaction that writes their messages.
(The agent answers no requests: revisions are resolved by the proposals service.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import structlog
from faststream.rabbit import RabbitBroker
from signoff_contracts.v1 import PausePointResolved, ProposalEvent
from signoff_runtime.consumer import PermanentError, consume
from signoff_runtime.inbox import first_delivery
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_agent import handback
from signoff_agent.metrics import HANDBACKS
from signoff_agent.tables import inbox
from signoff_agent.turns import Turns

log = structlog.get_logger(__name__)


@dataclass
class Consumers:
    engine: AsyncEngine
    broker: RabbitBroker
    topology: Topology
    amqp: AmqpSettings
    turns: Turns
    senders: Senders

    def register(self) -> None:
        consume(
            self.broker,
            self.topology,
            self.senders,
            "agent.events",
            lambda msg: self.event(msg.body),
            prefetch=self.amqp.prefetch,
        )

    async def event(self, body: bytes) -> None:
        try:
            kind = json.loads(body).get("type")
        except (ValueError, AttributeError):
            raise PermanentError("invalid_message", "not a JSON object") from None
        if kind == "proposal.event":
            await self.proposal_event(ProposalEvent.model_validate_json(body))
        elif kind == "pause_point.resolved":
            await self.pause_point_resolved(PausePointResolved.model_validate_json(body))
        else:
            log.info("event.ignored", type=str(kind)[:64])  # readers tolerate growth

    async def proposal_event(self, event: ProposalEvent) -> None:
        async with unit_of_work(self.engine) as uow:
            if not await first_delivery(uow.conn, inbox, event.message_id):
                HANDBACKS.labels(event=event.event, written="duplicate").inc()
                return
            written = await handback.apply(uow.conn, event, self.turns.directory)
        HANDBACKS.labels(event=event.event, written=str(written).lower()).inc()

    async def pause_point_resolved(self, event: PausePointResolved) -> None:
        async with unit_of_work(self.engine) as uow:
            if not await first_delivery(uow.conn, inbox, event.message_id):
                HANDBACKS.labels(event="pause_point", written="duplicate").inc()
                return
            waiting = await handback.apply_pause(uow.conn, event)
        HANDBACKS.labels(event="pause_point", written=str(waiting is not None).lower()).inc()
        if waiting is not None:
            self.turns.resume_soon(waiting)
