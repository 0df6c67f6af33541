"""Revising a pending proposal (the editable payload): one code path for HTTP and AMQP.

A revision never edits a contract. In ONE transaction it re-checks the person exactly like an
approval (token → current membership → the organization's own proposal, else 404 → the operation's
``authorize``, 403 and audited), requires the proposal to be pending and unexpired, runs the
operation's ``resolve`` on the edited request itself (``resolving``: read-only, the scope rebuilt
from the stored proposal, never from the request), and then the transition (one conditional UPDATE)
moves the old proposal ``pending → superseded`` (guarded by status AND expiry, so a concurrent
approval or the clock wins cleanly), the new proposal is inserted with a fresh expiry, both are
audited, and ``proposal.superseded`` / ``proposal.created`` go to the outbox. If the old one stopped
being pending meanwhile, nothing is written and the answer is the usual 409. Quotas are counted
after the swap, so a revision that merely replaces a proposal always fits; one that does not fit
raises ``Unremembered``, rolling everything back — the command's inbox row included.

Nothing leaves the service on the way: no other service is asked, so nothing can answer late.
"""

from __future__ import annotations

from typing import Any

import structlog
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.decisions import decide
from signoff_proposals.intake import resolving
from signoff_proposals.intake import store as intake
from signoff_proposals.intake.resolving import Refused
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import Answer
from signoff_proposals.lifecycle.transitions import transition

log = structlog.get_logger(__name__)
PENDING = ProposalStatus.PENDING
REVISED = Answer("revised")


class Unremembered(Exception):
    """Answer ``reply`` with nothing of the transaction kept (not even a command's inbox row),
    so the same command may be sent again later."""

    def __init__(self, reply: ApprovalReply) -> None:
        super().__init__(reply.result)
        self.reply = reply


def answer_for_revision(status: ProposalStatus) -> Answer | None:
    """Only a pending proposal can be revised; every other status is a 409 naming why."""
    if status is PENDING:
        return None
    answer = domain.answer_for(status)
    assert answer is not None
    if answer.result == "not_approvable":
        return answer
    return Answer("not_approvable", reason=status.value)


async def revise(
    ctx: Context, tx: UnitOfWork, token: str | None, proposal_id: str, request: dict[str, Any]
) -> ApprovalReply:
    admitted = await decide.admit(ctx, tx, token, proposal_id, "revise")
    if isinstance(admitted, ApprovalReply):
        return admitted
    row = admitted.row
    op = _operation(ctx, row.operation_kind, row.contract_version)
    if op is None:
        return _invalid(Reason(code="unknown_operation", params={"kind": row.operation_kind}), row)
    if not op.authorize(decide.actor_of(admitted), decide.scope_of(row)):
        return await decide.forbidden(tx, admitted, "revise")
    if (answer := answer_for_revision(ProposalStatus(row.status))) is not None:
        return decide.reply(answer, row)
    if row.lapsed:
        return await decide.after_lost_claim(ctx, tx, row.id)
    latest = _latest(ctx, row)
    if latest is None:
        return _invalid(Reason(code="unknown_operation", params={"kind": row.operation_kind}), row)
    try:
        parsed = resolving.parse_request(latest, request)
        arguments, preview = await resolving.resolve(tx.conn, latest, parsed, decide.scope_of(row))
    except Refused as refused:
        return _invalid(refused.reason, row)
    new = repo.NewProposal(
        proposal_id=new_id("prp"),
        organization_id=row.organization_id,
        requested_by=admitted.claims.sub,
        conversation_id=row.conversation_id,
        section=row.section,
        resource_id=row.resource_id,
        operation_kind=row.operation_kind,
        contract_version=latest.version,
        request=parsed.model_dump(mode="json"),
        arguments=arguments,
        preview=preview,
    )
    return await _supersede(ctx, tx, admitted, new)


async def _supersede(
    ctx: Context, tx: UnitOfWork, admitted: decide.Admitted, new: repo.NewProposal
) -> ApprovalReply:
    old_row = admitted.row
    old = await transition(
        ctx,
        tx,
        old_row.id,
        source=PENDING,
        target=ProposalStatus.SUPERSEDED,
        actor=admitted.claims.sub,
        organization_id=old_row.organization_id,
        values={"superseded_by": new.proposal_id},
        detail={"superseded_by": new.proposal_id},
    )
    if old is None:
        return await decide.after_lost_claim(ctx, tx, old_row.id)
    try:
        created = await intake.insert(
            ctx, tx, new, causation_id=new.proposal_id, detail={"supersedes": old.id}
        )
    except Refused as refused:  # a quota: the swap and any inbox row roll back with it
        reply = decide.reply(Answer("rate_limited", reason=refused.reason.code))
        raise Unremembered(reply.model_copy(update={"reason": refused.reason})) from None
    log.info("proposal.revised", proposal_id=old.id, superseded_by=created.id)
    return decide.reply(REVISED, created).model_copy(update={"correlation_id": old.id})


def _operation(ctx: Context, kind: str, version: int) -> AnyOperation | None:
    try:
        return ctx.operations.get(kind, version)
    except UnknownOperation:
        return None


def _latest(ctx: Context, row: Any) -> AnyOperation | None:
    """The newest version of the proposal's operation: an edit is resolved as of today."""
    try:
        op = ctx.operations.latest(row.operation_kind)
    except UnknownOperation:
        return None
    return op if op.section == row.section else None


def _invalid(reason: Reason, row: Any) -> ApprovalReply:
    reply = decide.reply(Answer("invalid", reason=reason.code), row)
    return reply.model_copy(update={"reason": reason})
