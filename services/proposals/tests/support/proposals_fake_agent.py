"""A stand-in for the agent's ``agent.resolve`` responder, on the test's own topology.

The real responder lives in the agent service; the proposals service only needs *an* answer to
``ResolveRequested``. This one resolves with the test domain's operation (what the agent would
do), or — as a test asks — refuses, answers garbage, answers under another correlation id, waits
before answering, or runs a hook first (to change the world between a revision's admission and
its swap). It runs on a broker of its own and answers by publishing to ``reply_to`` itself, so
every mode is in the test's hands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from faststream import AckPolicy
from faststream.rabbit import RabbitBroker
from faststream.rabbit.annotations import RabbitMessage
from proposals_testdomain import GrantPoints
from signoff_contracts.operations import Scope
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import ResolveReply, ResolveRequested
from signoff_runtime.settings import broker_user
from signoff_runtime.topology import Topology

Mode = Literal["resolve", "reject", "garbage", "stray", "unparseable"]


@dataclass
class FakeAgent:
    mode: Mode = "resolve"
    reason: Reason = field(default_factory=lambda: Reason(code="points_over_budget"))
    delay_s: float = 0.0
    before_reply: Callable[[ResolveRequested], Awaitable[None]] | None = None
    asked: list[ResolveRequested] = field(default_factory=list)

    async def answer(self, question: ResolveRequested) -> bytes:
        self.asked.append(question)
        if self.before_reply is not None:
            await self.before_reply(question)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.mode == "garbage":
            return b'{"type": "revision.resolve_reply", "accepted": "perhaps"}'
        return (await self._reply(question)).model_dump_json().encode()

    async def _reply(self, question: ResolveRequested) -> ResolveReply:
        common: dict[str, Any] = {"source": "agent", "correlation_id": question.proposal_id}
        if self.mode == "reject":
            return ResolveReply(accepted=False, reason=self.reason, **common)
        op = GrantPoints()
        request = op.parse_request(question.request)
        scope = Scope(
            organization_id=question.organization_id,
            section=question.section,
            resource_id=question.resource_id,
        )
        resolved = await op.resolve(request, scope, None)
        arguments = resolved.arguments.model_dump(mode="json")
        if self.mode == "unparseable":
            arguments = {**arguments, "points": "lots"}
        return ResolveReply(
            accepted=True,
            contract_version=op.version,
            request=request.model_dump(mode="json"),
            arguments=arguments,
            preview=resolved.preview.model_dump(mode="json"),
            **common,
        )


def _raw_body(msg: Any) -> Any:
    return msg.body


@asynccontextmanager
async def running_agent(amqp_url: str, topology: Topology) -> AsyncIterator[FakeAgent]:
    agent = FakeAgent()
    broker = RabbitBroker(amqp_url, log_level=logging.DEBUG)

    @broker.subscriber(
        topology.queue("agent.resolve"),
        exchange=topology.exchange("commands"),
        ack_policy=AckPolicy.ACK,
        no_reply=True,
        decoder=_raw_body,
    )
    async def on_resolve(msg: RabbitMessage) -> None:
        question = ResolveRequested.model_validate_json(msg.body)
        body = await agent.answer(question)
        correlation_id = msg.raw_message.correlation_id
        if agent.mode == "stray":
            correlation_id = "msg_someone_else"
        await broker.publish(
            body,
            routing_key=msg.reply_to,
            correlation_id=correlation_id,
            content_type="application/json",
            user_id=broker_user(amqp_url),
        )

    async with broker:
        await broker.start()
        yield agent
