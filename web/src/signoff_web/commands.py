"""Approval commands to the proposals service over AMQP request-reply.

Commands go through ``signoff_runtime.rpc.Requester``, on a connection of their own: many in
flight at once, each answered by correlation id. Each carries the person's token and a fresh
``message_id`` (the proposals inbox dedups on it); no reply in time raises
``signoff_runtime.rpc.Unanswered`` (the decision may or may not have been made: the card's live
status tells).
"""

from __future__ import annotations

from dataclasses import dataclass

from signoff_contracts.v1 import ApprovalCommand
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.rpc import Requester
from signoff_runtime.topology import Topology


@dataclass
class Commands:
    requester: Requester
    topology: Topology
    timeout_s: float

    async def send(self, command: ApprovalCommand) -> ApprovalReply:
        return await self.requester.ask(
            command, ApprovalReply, self.topology, "proposals.approvals", self.timeout_s
        )
