"""A request-reply command always gets a typed answer — even when it is being dead-lettered.

The handlers answer what parses; ``rejecting`` covers the rest: when the work fails for good
(``PermanentError``, or any failure on the delivery that ``settle`` will dead-letter because the
delivery limit is reached) the requester gets a typed rejection naming the reason, before the
error goes on to ``settle``, which copies the message to the dead-letter queue. Earlier failed
deliveries send nothing: the message is retried, and the retry answers. Only a request without a
reply address goes to the dead-letter queue unanswered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from faststream.rabbit.message import RabbitMessage
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import (
    Envelope,
    PausePointRequestReply,
    ProposalRequestReply,
)
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.consumer import PermanentError, delivery_count
from signoff_runtime.topology import Topology

from signoff_proposals.lifecycle.outbox import SOURCE

log = structlog.get_logger(__name__)


def rejection(queue_key: str, code: str, correlation_id: str | None) -> Envelope | None:
    """The typed "no" a requester on ``queue_key`` understands (``None``: not request-reply)."""
    reason = Reason(code=code)
    if queue_key == "proposals.requests":
        return ProposalRequestReply(
            accepted=False, reason=reason, source=SOURCE, correlation_id=correlation_id
        )
    if queue_key == "proposals.pause-points":
        return PausePointRequestReply(
            accepted=False, reason=reason, source=SOURCE, correlation_id=correlation_id
        )
    if queue_key == "proposals.approvals":
        return ApprovalReply(
            result="invalid",
            http_status=500,
            reason=reason,
            source=SOURCE,
            correlation_id=correlation_id,
        )
    return None


async def rejecting(
    msg: RabbitMessage,
    topology: Topology,
    queue_key: str,
    work: Callable[[], Awaitable[None]],
    reply: Callable[[Envelope], Awaitable[None]],
) -> None:
    """Run ``work``; answer with a typed rejection when its failure is final, then re-raise."""
    try:
        await work()
    except PermanentError as exc:
        await _answer(msg, queue_key, exc.code, reply)
        raise
    except Exception:
        if delivery_count(msg) + 1 >= topology.delivery_limit:
            await _answer(msg, queue_key, "handler_failed", reply)
        raise


async def _answer(
    msg: RabbitMessage, queue_key: str, code: str, reply: Callable[[Envelope], Awaitable[None]]
) -> None:
    answer = rejection(queue_key, code, msg.raw_message.correlation_id)
    if answer is None or not msg.reply_to:
        return
    try:
        await reply(answer)
    except Exception as exc:  # the dead letter still records it; the requester times out
        log.warning("rejection.reply_failed", queue=queue_key, code=code, error=repr(exc))
