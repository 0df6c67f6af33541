"""Approval commands over AMQP: dedup by ``message_id``, then the same code path as HTTP.

The inbox row and the decision commit together, with the reply stored beside the row: a
replayed command (the same ``message_id``) gets the very reply the first one got and decides
nothing again — even if the token has expired since, or the proposal has moved on. A revision
is decided in one transaction like the others (``resolve`` runs here); one refused for a quota
is answered without keeping its inbox row (``revisions.Unremembered``).

Each person's commands are rate-limited before anything else, as approval requests are over HTTP
(``SIGNOFF_LIMITS__APPROVALS_PER_MINUTE``, per process): over the rate a command is answered
``rate_limited`` (reason ``rate_limited``, 429) and neither executed nor remembered, so the same
command sent again later is decided then. A command whose token does not verify is not counted;
it is answered ``unauthenticated`` as before.
"""

from __future__ import annotations

import math

import structlog
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import (
    ApprovalCommand,
    ApproveProposal,
    DeclineProposal,
    ResolvePausePoint,
    ReviseProposal,
    WithdrawProposal,
)
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.inbox import first_delivery, store_result, stored_result
from signoff_runtime.tokens import PROPOSALS_AUDIENCE, TokenInvalid, verify_token
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work

from signoff_proposals.context import Context
from signoff_proposals.decisions import decide, revisions, withdrawals
from signoff_proposals.lifecycle.domain import Answer
from signoff_proposals.pause_points import lifecycle as pause_points
from signoff_proposals.pause_points.rules import Resolution
from signoff_proposals.tables import inbox

log = structlog.get_logger(__name__)
COMMAND_NAMES = {
    "approval.approve": "approve",
    "approval.decline": "decline",
    "approval.revise": "revise",
    "approval.resolve": "resolve",
    "approval.withdraw": "withdraw",
}


async def answer(ctx: Context, command: ApprovalCommand) -> ApprovalReply:
    """The command decided in a transaction of its own (the queue's consumer without batches)."""
    refused = over_rate(ctx, command)
    if refused is not None:
        return refused
    try:
        async with unit_of_work(ctx.engine) as tx:
            return await decided(ctx, tx, command)
    except revisions.Unremembered as unremembered:
        return unremembered.reply


async def decided(ctx: Context, tx: UnitOfWork, command: ApprovalCommand) -> ApprovalReply:
    """The command decided on ``tx`` with its inbox row and its stored reply (or the reply a
    replay finds stored); ``revisions.Unremembered`` (its reply's ``causation_id`` set) when
    nothing of ``tx`` may be kept."""
    if not await first_delivery(tx.conn, inbox, command.message_id):
        stored = await stored_result(tx.conn, inbox, command.message_id)
        if stored is None:  # the first delivery always stores its reply in its tx
            raise RuntimeError("inbox row without a stored reply")
        return ApprovalReply.model_validate(stored)
    try:
        reply = await _dispatch(ctx, tx, command)
    except revisions.Unremembered as unremembered:
        caused = unremembered.reply.model_copy(update={"causation_id": command.message_id})
        raise revisions.Unremembered(caused) from None
    reply = reply.model_copy(update={"causation_id": command.message_id})
    await store_result(tx.conn, inbox, command.message_id, reply.model_dump(mode="json"))
    return reply


async def _dispatch(ctx: Context, tx: UnitOfWork, command: ApprovalCommand) -> ApprovalReply:
    if isinstance(command, ApproveProposal):
        return await decide.approve(ctx, tx, command.token, command.proposal_id)
    if isinstance(command, DeclineProposal):
        return await decide.decline(ctx, tx, command.token, command.proposal_id, command.reason)
    if isinstance(command, WithdrawProposal):
        return await withdrawals.withdraw(
            ctx, tx, command.token, command.proposal_id, command.reason
        )
    if isinstance(command, ReviseProposal):
        return await revisions.revise(ctx, tx, command.token, command.proposal_id, command.request)
    assert isinstance(command, ResolvePausePoint)
    resolution = Resolution(
        command.action, command.option, command.data, command.reply, command.payload
    )
    return await pause_points.resolve(ctx, tx, command.token, command.pause_point_id, resolution)


def over_rate(ctx: Context, command: ApprovalCommand) -> ApprovalReply | None:
    """The ``rate_limited`` reply if the command's person is over their rate, else ``None``."""
    try:
        claims = verify_token(ctx.settings.auth, command.token, audience=PROPOSALS_AUDIENCE)
    except TokenInvalid:
        return None
    wait = ctx.command_rate.take(f"{claims.org}/{claims.sub}")
    if wait <= 0:
        return None
    log.info("approval.rate_limited", command=COMMAND_NAMES[command.type])
    refused = decide.reply(Answer("rate_limited"))
    reason = Reason(
        code="rate_limited",
        params={"bucket": "approvals", "retry_after_s": max(1, math.ceil(wait))},
    )
    return refused.model_copy(update={"reason": reason, "causation_id": command.message_id})
