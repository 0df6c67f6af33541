"""The quorum step of an approval: record it, count it, and say whether it completes the quorum.

``decisions.decide.approve`` calls ``tally`` after its checks (member, status, arguments,
``authorize``) and before THE claim — the one conditional ``UPDATE … SET status = 'executing'
WHERE status = 'pending' AND unexpired`` that makes the contract. Why a proposal gets exactly one
contract, however many final approvals race:

1. *At most one*: only the claim makes a contract, and the claim is that conditional UPDATE.
   Under READ COMMITTED PostgreSQL re-checks its WHERE clause on the newest row version, so of
   any number of transactions that reach it, one moves the row and the others match nothing
   (they answer from the row as it is then). The quorum adds a condition before the claim; it
   removes none.
2. *At least one* (no quorum lost between two racers): the proposal row is locked before it is
   counted (``SELECT … FOR UPDATE``: ``decide.approve`` reads it so, its first statement), so
   approvals of one proposal take turns; each counts the approvals committed before it plus
   its own. Without the lock, the two final approvals of a 2-of-N proposal could each see only
   their own uncommitted row, count 1, and both stop short — a proposal with two approvals
   that never runs.
3. *Distinct people*: ``approvals`` has the primary key (proposal, approver), so a person's
   repeated approval inserts nothing and counts once; the count is of rows, not of commands.

The approval is recorded in the same transaction as the claim it may complete, so the contract,
its audit row and the approvals that made it commit together or not at all. A proposal that is
not pending once locked (claimed, declined, expired meanwhile) records nothing: the caller
answers from the row.

What it costs the claim: one statement (``repository.record``: the approval, the row's copy
and, under a policy of more than one approver, its ``approved`` audit row); the lock is the
caller's read of the row.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from signoff_contracts.operations import Actor
from signoff_contracts.status import ProposalStatus
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.lifecycle.repository import AuditEntry, Stored
from signoff_proposals.policies import domain
from signoff_proposals.policies import repository as policies

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Tally:
    """Where one approval leaves its proposal."""

    row: Stored
    #: the proposal was no longer pending (or had lapsed) once locked: nothing recorded
    lost: bool = False
    #: why the approval may not count (a reason code): nothing recorded
    refused: str | None = None
    recorded: int = 0
    required: int = 1

    @property
    def complete(self) -> bool:
        return not (self.lost or self.refused) and self.recorded >= self.required


async def tally(
    ctx: Context, tx: UnitOfWork, proposal_id: str, actor: Actor, *, locked: Stored | None = None
) -> Tally:
    """Where ``actor``'s approval leaves the proposal; ``locked``: the row as the caller read it
    with its lock (else it is locked and read here)."""
    unsafe = ctx.settings.unsafe
    row = locked if locked is not None else await policies.lock(tx.conn, proposal_id)
    # SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS drops this status check too, as it does the claim's
    if not unsafe.claim_without_status and (
        row.status != ProposalStatus.PENDING.value or row.lapsed
    ):
        return Tally(row, lost=True)
    need = domain.Requirement(
        required=row.approvals_required,
        roles=tuple(row.approver_roles) if row.approver_roles is not None else None,
        proposer_may_approve=row.proposer_may_approve,
        policy_version=row.policy_version,
    )
    why = domain.refusal(need, role=actor.role, is_proposer=actor.user_id == row.requested_by)
    if why is not None:
        return Tally(row, refused=why, required=need.required)
    audited = None
    if need.required > 1:  # the copy gains this approval, if the record is new
        detail = {"role": actor.role, "recorded": len(row.approvals) + 1, "required": need.required}
        audited = AuditEntry(proposal_id, actor.user_id, "approved", detail=detail)
    updated = await policies.record(
        tx.conn, proposal_id, actor.user_id, actor.role, audited=audited
    )
    shown = updated if updated is not None else row
    recorded = len(shown.approvals)
    # SIGNOFF_UNSAFE__SKIP_QUORUM (tests only): the first approval completes any quorum
    required = 1 if unsafe.skip_quorum else need.required
    log.info(
        "approval.recorded" if updated is not None else "approval.repeated",
        proposal_id=proposal_id,
        recorded=recorded,
        required=need.required,
    )
    return Tally(shown, recorded=recorded, required=required)
