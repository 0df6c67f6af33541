"""Asking the agent to resolve an edited request (``ResolveRequested`` → ``ResolveReply``).

Only the agent runs an operation's ``resolve``. The question goes out as a request-reply on the
``commands`` exchange (``revision.resolve``) with a deadline, never inside a database
transaction. FastStream's ``request`` takes the first message that reaches the reply queue, and a
late answer to an earlier, timed-out request could be that message: each request therefore
carries a correlation id of its own (its ``message_id``), and an answer carrying another one is
treated like no answer at all — nothing has been written yet, so "try again" is always safe.

The requests go through a broker connection of their own (``requests_broker``). FastStream
publishes a request on the channel its exchange object was first declared on and listens for the
reply on its default channel; RabbitMQ's direct reply-to only works when both are the same. In the
consumers' broker the ``commands`` exchange is first declared on a subscriber's channel, and the
publish fails with "fast reply consumer does not exist".
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from faststream.exceptions import FastStreamException
from faststream.rabbit import RabbitBroker
from pydantic import ValidationError
from signoff_contracts.v1 import ResolveReply, ResolveRequested
from signoff_runtime import tracing
from signoff_runtime.topology import ROUTING_KEYS

from signoff_proposals.context import Context
from signoff_proposals.settings import ProposalsSettings

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No usable answer: ``agent_unavailable`` (none in time) or ``agent_reply_invalid``."""

    code: str


def requests_broker(settings: ProposalsSettings) -> RabbitBroker:
    """A broker without subscribers, for request-reply only (see the module docstring)."""
    return RabbitBroker(
        settings.amqp.url,
        app_id="signoff-proposals-requests",
        middlewares=[tracing.TraceMiddleware],
        log_level=10,
    )


async def ask(ctx: Context, question: ResolveRequested) -> ResolveReply | Unavailable:
    assert ctx.broker is not None, "the service's broker is needed to ask the agent"
    try:
        response = await ctx.broker.request(
            question.model_dump_json().encode(),
            exchange=ctx.topology.exchange("commands"),
            routing_key=ROUTING_KEYS["agent.resolve"],
            message_id=question.message_id,
            correlation_id=question.message_id,
            message_type=question.type,
            content_type="application/json",
            timeout=ctx.settings.proposals.resolve_timeout_s,
        )
    except (TimeoutError, FastStreamException, OSError) as exc:
        log.warning(
            "revision.agent_unavailable", proposal_id=question.proposal_id, error=type(exc).__name__
        )
        return Unavailable("agent_unavailable")
    if response.raw_message.correlation_id != question.message_id:
        log.warning("revision.stray_reply", proposal_id=question.proposal_id)
        return Unavailable("agent_unavailable")
    try:
        return ResolveReply.model_validate_json(response.body)
    except ValidationError:
        log.error("revision.agent_reply_invalid", proposal_id=question.proposal_id)
        return Unavailable("agent_reply_invalid")
