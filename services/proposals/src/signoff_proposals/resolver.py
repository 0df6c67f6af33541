"""Asking the agent to resolve an edited request (``ResolveRequested`` → ``ResolveReply``).

Only the agent runs an operation's ``resolve``. The question goes out as a request-reply on the
``commands`` exchange (``revision.resolve``) with a deadline, never inside a database
transaction, through the service's ``Requester`` (``signoff_runtime.rpc``: its own connection
and channel, many requests in flight, each answer matched by correlation id — the request's
``message_id``). An answer carrying another correlation id is treated like no answer at all —
nothing has been written yet, so "try again" is always safe.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from pydantic import ValidationError
from signoff_contracts.v1 import ResolveReply, ResolveRequested
from signoff_runtime.rpc import RequestFailed
from signoff_runtime.topology import ROUTING_KEYS

from signoff_proposals.context import Context

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No usable answer: ``agent_unavailable`` (none in time) or ``agent_reply_invalid``."""

    code: str


async def ask(ctx: Context, question: ResolveRequested) -> ResolveReply | Unavailable:
    assert ctx.requester is not None, "the service's requester is needed to ask the agent"
    try:
        response = await ctx.requester.request(
            question.model_dump_json().encode(),
            exchange=ctx.topology.name("commands"),
            routing_key=ROUTING_KEYS["agent.resolve"],
            message_id=question.message_id,
            correlation_id=question.message_id,
            message_type=question.type,
            timeout=ctx.settings.proposals.resolve_timeout_s,
        )
    except (TimeoutError, RequestFailed, OSError) as exc:
        log.warning(
            "revision.agent_unavailable", proposal_id=question.proposal_id, error=type(exc).__name__
        )
        return Unavailable("agent_unavailable")
    if response.correlation_id != question.message_id:
        log.warning("revision.stray_reply", proposal_id=question.proposal_id)
        return Unavailable("agent_unavailable")
    try:
        return ResolveReply.model_validate_json(response.body)
    except ValidationError:
        log.error("revision.agent_reply_invalid", proposal_id=question.proposal_id)
        return Unavailable("agent_reply_invalid")
