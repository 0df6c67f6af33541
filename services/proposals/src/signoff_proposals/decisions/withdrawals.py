"""Withdrawing: the proposer (or a manager) takes a pending proposal back.

A withdrawal is a decline by the other side, on the same path as the decisions (``decide``): the
token, the person's current membership, the organization's own proposal (else "not found"), its
status (the DESIGN table). Then: the person who proposed it, or anyone the operation's
``authorize`` would let decide it (a manager) — checked now, not when it was proposed — may take
it back; anyone else is refused, audited. ONE conditional UPDATE pending → ``withdrawn`` writes
the audit row and the ``proposal.decided`` event in the same transaction, so the conversation is
answered the way a decline is. Withdrawing executes nothing.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.status import ProposalStatus
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.decisions.decide import (
    actor_of,
    admit_pending,
    end_pending,
    forbidden,
    operation_of,
    scope_of,
)


async def withdraw(
    ctx: Context, tx: UnitOfWork, token: str | None, proposal_id: str, reason: str | None = None
) -> ApprovalReply:
    admitted = await admit_pending(ctx, tx, token, proposal_id, "withdraw")
    if isinstance(admitted, ApprovalReply):
        return admitted
    row = admitted.row
    proposer = row.requested_by == admitted.claims.sub
    # SIGNOFF_UNSAFE__WITHDRAW_ANYONES (tests only): any member may withdraw
    anyone = ctx.settings.unsafe.withdraw_anyones
    op = operation_of(ctx, row)
    manager = op is not None and op.authorize(actor_of(admitted), scope_of(row))
    if not (proposer or manager or anyone):
        return await forbidden(tx, admitted, "withdraw")
    detail: dict[str, Any] = {
        "as": "proposer" if proposer else "manager" if manager else "anyone (unsafe)"
    }
    if reason:
        detail["reason"] = reason
    return await end_pending(ctx, tx, admitted, ProposalStatus.WITHDRAWN, reason, detail)
