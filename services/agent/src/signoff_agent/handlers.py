"""The agent's AMQP consumers: proposal and pause-point events, and revision resolves.

Both acknowledge manually through ``settle`` after their transaction committed, and parse the
body themselves, so a malformed message is dead-lettered with a reason rather than dropped.
Events are deduplicated by ``message_id`` in the inbox, in the transaction that writes their
messages. A resolve's reply is published after the commit and before the ack (``no_reply``
turns FastStream's own reply off), and a replayed request gets the stored reply.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitBroker
from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts.operations import Directory
from signoff_contracts.v1 import PausePointResolved, ProposalEvent, ResolveReply, ResolveRequested
from signoff_runtime.consumer import Delivery, PermanentError, raw_body, settle
from signoff_runtime.inbox import first_delivery, store_result, stored_result
from signoff_runtime.registry import Operations
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_agent import handback, revisions
from signoff_agent.metrics import HANDBACKS
from signoff_agent.tables import inbox
from signoff_agent.turns import Turns

log = structlog.get_logger(__name__)
Handler = Callable[[Message], Awaitable[None]]


@dataclass
class Consumers:
    engine: AsyncEngine
    broker: RabbitBroker
    topology: Topology
    amqp: AmqpSettings
    operations: Operations
    directory: Directory
    turns: Turns
    senders: Senders

    def register(self) -> None:
        topo = self.topology

        def subscriber(key: str) -> Callable[[Handler], object]:
            # No ``exchange=``: the topology already bound the queues. (It once also kept
            # FastStream's ``broker.request`` working; requests now go through
            # ``signoff_runtime.rpc.Requester``, on a connection of their own.)
            return self.broker.subscriber(
                topo.queue(key),
                ack_policy=AckPolicy.MANUAL,
                channel=Channel(prefetch_count=self.amqp.prefetch),
                no_reply=True,
                decoder=raw_body,
            )

        @subscriber("agent.events")
        async def on_event(msg: Delivery) -> None:
            await settle(
                msg,
                broker=self.broker,
                topology=topo,
                queue_key="agent.events",
                senders=self.senders,
                work=lambda: self.event(msg.body),
            )

        @subscriber("agent.resolve")
        async def on_resolve(msg: Delivery) -> None:
            await settle(
                msg,
                broker=self.broker,
                topology=topo,
                queue_key="agent.resolve",
                senders=self.senders,
                work=lambda: self.resolve(msg),
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
        async with self.engine.begin() as conn:
            if not await first_delivery(conn, inbox, event.message_id):
                HANDBACKS.labels(event=event.event, written="duplicate").inc()
                return
            written = await handback.apply(conn, event)
        HANDBACKS.labels(event=event.event, written=str(written).lower()).inc()

    async def pause_point_resolved(self, event: PausePointResolved) -> None:
        async with self.engine.begin() as conn:
            if not await first_delivery(conn, inbox, event.message_id):
                HANDBACKS.labels(event="pause_point", written="duplicate").inc()
                return
            waiting = await handback.apply_pause(conn, event)
        HANDBACKS.labels(event="pause_point", written=str(waiting is not None).lower()).inc()
        if waiting is not None:
            self.turns.resume_soon(waiting)

    async def resolve(self, msg: Message) -> None:
        try:
            request = ResolveRequested.model_validate_json(msg.body)
        except ValidationError:
            if not msg.reply_to:
                raise
            await self._reply(msg, revisions.invalid(msg.raw_message.correlation_id))
            return
        async with self.engine.begin() as conn:
            if await first_delivery(conn, inbox, request.message_id):
                reply = await revisions.resolve(conn, request, self.operations, self.directory)
                await store_result(conn, inbox, request.message_id, reply.model_dump(mode="json"))
            else:
                reply = ResolveReply.model_validate(
                    await stored_result(conn, inbox, request.message_id)
                )
        await self._reply(msg, reply)

    async def _reply(self, msg: Message, reply: ResolveReply) -> None:
        if msg.reply_to:
            await self.broker.publish(
                reply.model_dump_json().encode(),
                routing_key=msg.reply_to,
                correlation_id=msg.raw_message.correlation_id,
                message_id=reply.message_id,
                message_type=reply.type,
                content_type="application/json",
                user_id=self.senders.me,
                timeout=self.amqp.publish_timeout_s,
            )
