"""Approval commands over AMQP: dedup by ``message_id``, then the same code path as HTTP.

The inbox row and the decision commit together, with the reply stored beside the row: a
replayed command (the same ``message_id``) gets the very reply the first one got and decides
nothing again — even if the token has expired since, or the proposal has moved on. A revision
asks the agent between two transactions, so ``revisions`` keeps its inbox row itself, in the
transaction that decides.
"""

from __future__ import annotations

from signoff_contracts.v1 import (
    ApprovalCommand,
    ApprovalReply,
    ApproveProposal,
    DeclineProposal,
    ResolvePausePoint,
    ReviseProposal,
)
from signoff_runtime.inbox import first_delivery, store_result, stored_result

from signoff_proposals import decide, pause_points, revisions
from signoff_proposals import repository as repo
from signoff_proposals.context import Context
from signoff_proposals.pause_rules import Resolution
from signoff_proposals.tables import inbox

COMMAND_NAMES = {
    "approval.approve": "approve",
    "approval.decline": "decline",
    "approval.revise": "revise",
    "approval.resolve": "resolve",
}


async def answer(ctx: Context, command: ApprovalCommand) -> ApprovalReply:
    if isinstance(command, ReviseProposal):
        return await revisions.revise(
            ctx, command.token, command.proposal_id, command.request, dedup=command.message_id
        )
    async with repo.unit_of_work(ctx.engine) as tx:
        if not await first_delivery(tx.conn, inbox, command.message_id):
            stored = await stored_result(tx.conn, inbox, command.message_id)
            if stored is None:  # the first delivery always stores its reply in its transaction
                raise RuntimeError("inbox row without a stored reply")
            return ApprovalReply.model_validate(stored)
        reply = await _dispatch(ctx, tx, command)
        reply = reply.model_copy(update={"causation_id": command.message_id})
        await store_result(tx.conn, inbox, command.message_id, reply.model_dump(mode="json"))
    return reply


async def _dispatch(ctx: Context, tx: repo.Tx, command: ApprovalCommand) -> ApprovalReply:
    if isinstance(command, ApproveProposal):
        return await decide.approve(ctx, tx, command.token, command.proposal_id)
    if isinstance(command, DeclineProposal):
        return await decide.decline(ctx, tx, command.token, command.proposal_id, command.reason)
    assert isinstance(command, ResolvePausePoint), "revisions are answered before the inbox"
    resolution = Resolution(command.action, command.option, command.data, command.reply)
    return await pause_points.resolve(ctx, tx, command.token, command.pause_point_id, resolution)
