"""Approval commands to the proposals service over AMQP request-reply.

The web holds its own broker connection with no subscribers: FastStream serialises
``request()`` per broker, and a broker that also consumed would make decisions queue behind
deliveries. Each command carries the person's token and a fresh ``message_id`` (the proposals
inbox dedups on it); the reply must answer this very command — its correlation id is checked —
and no reply in time raises ``CommandUnavailable`` (the decision may or may not have been made:
the card's live status tells).
"""

from __future__ import annotations

from dataclasses import dataclass

from faststream.exceptions import FastStreamException
from faststream.rabbit import RabbitBroker
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ApprovalCommand
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.topology import ROUTING_KEYS, Topology


class CommandUnavailable(Exception):
    """No (matching) reply within the timeout."""


@dataclass
class Commands:
    broker: RabbitBroker
    topology: Topology
    timeout_s: float
    #: this connection's broker user, sent as ``user_id``: the proposals service refuses a
    #: command without it (RabbitMQ refuses one naming another user)
    user_id: str

    async def send(self, command: ApprovalCommand) -> ApprovalReply:
        correlation_id = new_id("cmd")
        try:
            response = await self.broker.request(
                command.model_dump_json(),
                exchange=self.topology.exchange("commands"),
                routing_key=ROUTING_KEYS["proposals.approvals"],
                message_id=command.message_id,
                correlation_id=correlation_id,
                content_type="application/json",
                persist=True,
                user_id=self.user_id,
                timeout=self.timeout_s,
            )
        except (TimeoutError, FastStreamException) as exc:
            raise CommandUnavailable(command.message_id) from exc
        if response.correlation_id != correlation_id:
            raise CommandUnavailable(command.message_id)
        return ApprovalReply.model_validate_json(response.body)
