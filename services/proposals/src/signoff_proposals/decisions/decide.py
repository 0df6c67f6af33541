"""Approving and declining: the one code path behind both HTTP and AMQP approval commands.

Every decision re-checks, in this order: the token; the person's *current* membership of the
token's organization (through the domain's directory — a token outlives a membership); that the
proposal belongs to that organization (another organization's proposal is "not found", exactly
like an unknown id); its status (the DESIGN table); that its stored arguments still parse into
the operation's ``Arguments``; and the operation's ``authorize``. Only then does ONE conditional
UPDATE claim it (``transitions.transition``) — and the audit row, the signed execution contract
and the event are written in that same transaction, so a claim without its contract (or the
reverse) cannot exist.

Refusals that concern a real proposal of the person's organization are audited. Withdrawing
(``withdrawals``) follows the same admission.

It is a little over 300 lines because the admission order above is the security argument, and
reads best as one sequence in one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog
from pydantic import ValidationError
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Actor, AnyOperation, Membership, Scope
from signoff_contracts.outcomes import TerminalFailure
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v2 import ApprovalCount, ApprovalReply
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.tokens import PROPOSALS_AUDIENCE, Claims, TokenInvalid, verify_token_async
from signoff_runtime.unit_of_work import UnitOfWork
from signoff_runtime.validation import summary

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import Answer
from signoff_proposals.lifecycle.outbox import SOURCE
from signoff_proposals.lifecycle.repository import Stored
from signoff_proposals.lifecycle.transitions import expire, transition
from signoff_proposals.policies import domain as policy_domain
from signoff_proposals.policies import quorum

log = structlog.get_logger(__name__)
PENDING = ProposalStatus.PENDING


@dataclass(frozen=True, slots=True)
class Admitted:
    claims: Claims
    member: Membership
    row: Stored


async def approve(
    ctx: Context, tx: UnitOfWork, token: str | None, proposal_id: str
) -> ApprovalReply:
    # the row is read with its lock, which the quorum step needs (policies.quorum); not under
    # SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS (tests only), whose racers read it before either wins
    locked = not ctx.settings.unsafe.claim_without_status
    admitted = await admit(ctx, tx, token, proposal_id, "approve", lock=locked)
    if isinstance(admitted, ApprovalReply):
        return admitted
    row = admitted.row
    if (answer := domain.answer_for(ProposalStatus(row.status))) is not None:
        return reply(answer, row)
    if row.lapsed:
        return await after_lost_claim(ctx, tx, row.id)
    try:
        op = ctx.operations.get(row.operation_kind, row.contract_version)
        op.parse_arguments(row.arguments)
    except (UnknownOperation, ValidationError) as exc:
        return await _fail_unparseable(ctx, tx, admitted, exc)
    if not op.authorize(actor_of(admitted), scope_of(row)):
        return await forbidden(tx, admitted, "approve")
    # the approval policy's quorum (policies.quorum says why this stays exactly-once)
    counted = await quorum.tally(
        ctx, tx, row.id, actor_of(admitted), locked=row if locked else None
    )
    if counted.lost:
        return await after_lost_claim(ctx, tx, row.id)
    if counted.refused is not None:
        return await forbidden(tx, admitted, "approve", why=counted.refused)
    if not counted.complete:
        return reply(domain.APPROVAL_RECORDED, counted.row)
    return await _claim(ctx, tx, admitted)


async def decline(
    ctx: Context, tx: UnitOfWork, token: str | None, proposal_id: str, reason: str | None = None
) -> ApprovalReply:
    admitted = await admit_pending(ctx, tx, token, proposal_id, "decline")
    if isinstance(admitted, ApprovalReply):
        return admitted
    row = admitted.row
    op = operation_of(ctx, row)
    # Declining executes nothing: an operation no longer installed cannot vouch for a role, and
    # that must not leave its proposals undeclinable.
    if op is not None and not op.authorize(actor_of(admitted), scope_of(row)):
        return await forbidden(tx, admitted, "decline")
    # any eligible person's decline ends it (the proposer's too: stopping is always safe)
    if row.approver_roles is not None and admitted.member.role not in row.approver_roles:
        return await forbidden(tx, admitted, "decline", why=policy_domain.ROLE_NOT_COUNTED)
    detail = {"reason": reason} if reason else None
    return await end_pending(ctx, tx, admitted, ProposalStatus.DECLINED, reason, detail)


async def admit_pending(
    ctx: Context, tx: UnitOfWork, token: str | None, proposal_id: str, command: str
) -> Admitted | ApprovalReply:
    """``admit``, then the status table and the expiry: the person and a still-pending,
    unexpired proposal, or the reply that ends the command (decline, withdraw)."""
    admitted = await admit(ctx, tx, token, proposal_id, command)
    if isinstance(admitted, ApprovalReply):
        return admitted
    row = admitted.row
    if (answer := domain.answer_for(ProposalStatus(row.status))) is not None:
        return reply(answer, row)
    if row.lapsed:
        return await after_lost_claim(ctx, tx, row.id)
    return admitted


async def end_pending(
    ctx: Context,
    tx: UnitOfWork,
    admitted: Admitted,
    to: ProposalStatus,
    reason: str | None,
    detail: dict[str, Any] | None,
) -> ApprovalReply:
    """A person ends a pending proposal (``declined`` or ``withdrawn``): the transition (one
    conditional UPDATE, its audit row and its ``decided`` event); executes nothing."""
    ended = await transition(
        ctx,
        tx,
        admitted.row.id,
        source=PENDING,
        target=to,
        actor=admitted.claims.sub,
        values={
            "decided_by": admitted.claims.sub,
            "decided_at": repo.DB_CLOCK,
            "decline_reason": reason,
        },
        detail=detail,
    )
    if ended is None:
        return await after_lost_claim(ctx, tx, admitted.row.id)
    return reply(domain.DECLINED if to is ProposalStatus.DECLINED else domain.WITHDRAWN, ended)


async def admit(
    ctx: Context,
    tx: UnitOfWork,
    token: str | None,
    proposal_id: str,
    command: str,
    *,
    lock: bool = False,
) -> Admitted | ApprovalReply:
    """The person (token, current membership) and their organization's proposal, or the reply
    that ends the command; ``lock``: the row is read locked until the transaction ends."""
    try:
        claims = await verify_token_async(ctx.settings.auth, token, audience=PROPOSALS_AUDIENCE)
    except TokenInvalid:
        return reply(domain.UNAUTHENTICATED)
    row = await repo.get(tx.conn, proposal_id, lock=lock)
    in_org = row is not None and row.organization_id == claims.org
    member = await ctx.directory.membership(tx.conn, claims.sub, claims.org)
    if member is None or member.organization_id != claims.org:
        if row is not None and in_org:
            await repo.write_audit(
                tx,
                row.id,
                actor=claims.sub,
                action=f"{command}_forbidden",
                detail={"why": "not_a_member"},
            )
        log.info("approval.forbidden", proposal_id=proposal_id, why="not_a_member")
        return reply(domain.FORBIDDEN)
    if row is None or not in_org:
        return reply(domain.NOT_FOUND)
    return Admitted(claims, member, row)


async def _claim(ctx: Context, tx: UnitOfWork, admitted: Admitted) -> ApprovalReply:
    group = ctx.settings.proposals
    # SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS (tests only): any status will do
    unsafe = ctx.settings.unsafe.claim_without_status
    claimed = await transition(
        ctx,
        tx,
        admitted.row.id,
        source=PENDING,
        target=ProposalStatus.EXECUTING,
        actor=admitted.claims.sub,
        any_status=unsafe,
        values={
            "decided_by": admitted.claims.sub,
            "decided_at": repo.DB_CLOCK,
            "contract_id": new_id("ctr"),
            "execute_by": repo.Later(timedelta(seconds=ctx.settings.contracts.execute_within_s)),
            "republish_after": repo.Later(timedelta(seconds=group.stuck_after_s)),
        },
    )
    if claimed is None:
        return await after_lost_claim(ctx, tx, admitted.row.id)
    log.info("proposal.claimed", proposal_id=claimed.id, contract_id=claimed.contract_id)
    return reply(domain.CLAIMED, claimed)


async def after_lost_claim(ctx: Context, tx: UnitOfWork, proposal_id: str) -> ApprovalReply:
    """The conditional UPDATE matched nothing (or the row had lapsed): answer from the row now.

    A lapsed pending row is marked expired on the spot (``expire``, as the sweep would later).
    """
    row = await repo.get(tx.conn, proposal_id)
    assert row is not None, "proposals are never deleted"
    status = ProposalStatus(row.status)
    shown: Stored = row
    if status is PENDING and row.lapsed:
        expired = await expire(ctx, tx, noticed_by="decision", proposal_id=proposal_id)
        shown = expired[0] if expired else row
    return reply(domain.answer_after_lost_claim(status, bool(row.lapsed)), shown)


async def _fail_unparseable(
    ctx: Context, tx: UnitOfWork, admitted: Admitted, exc: Exception
) -> ApprovalReply:
    """The stored contract can no longer be read as its operation's ``Arguments``: it fails.

    The person sees only a correlation id; what went wrong (field locations and error types,
    never values) goes to the log under that id.
    """
    row = admitted.row
    correlation_id = new_id("cor")
    log.error(
        "proposal.arguments_unparseable",
        proposal_id=row.id,
        kind=row.operation_kind,
        version=row.contract_version,
        correlation_id=correlation_id,
        error=_summary(exc),
    )
    outcome = TerminalFailure(correlation_id=correlation_id)
    failed = await transition(
        ctx,
        tx,
        row.id,
        source=PENDING,
        target=ProposalStatus.FAILED,
        actor=admitted.claims.sub,
        values={
            "outcome": outcome.model_dump(mode="json"),
            "outcome_at": repo.DB_CLOCK,
            "decided_by": admitted.claims.sub,
            "decided_at": repo.DB_CLOCK,
        },
        detail={"why": "arguments_unparseable", "correlation_id": correlation_id},
    )
    if failed is None:
        return await after_lost_claim(ctx, tx, row.id)
    return reply(domain.ALREADY_COMPLETED, failed)


async def forbidden(
    tx: UnitOfWork, admitted: Admitted, command: str, why: str = "role"
) -> ApprovalReply:
    """Refused and audited; ``why`` other than the operation's role check (an approval policy's
    rule) is also the reply's reason code."""
    await repo.write_audit(
        tx,
        admitted.row.id,
        actor=admitted.claims.sub,
        action=f"{command}_forbidden",
        detail={"why": why, "role": admitted.member.role},
    )
    log.info("approval.forbidden", proposal_id=admitted.row.id, why=why)
    return reply(domain.FORBIDDEN if why == "role" else domain.Answer("forbidden", reason=why))


def reply(answer: Answer, row: Stored | None = None) -> ApprovalReply:
    """The typed reply; a proposal is shown only to those allowed to see it."""
    shown = None if row is None else repo.view(row)
    counts = None
    if shown is not None and shown.requirement is not None and answer in domain.COUNTED:
        counts = ApprovalCount(recorded=len(shown.approvals), required=shown.requirement.required)
    return ApprovalReply(
        approvals=counts,
        result=answer.result,
        http_status=answer.status_code,
        proposal=shown,
        outcome=shown.outcome if (shown is not None and answer.with_outcome) else None,
        reason=Reason(code=answer.reason) if answer.reason else None,
        source=SOURCE,
        correlation_id=None if row is None else row.id,
    )


def operation_of(ctx: Context, row: Stored) -> AnyOperation | None:
    try:
        return ctx.operations.get(row.operation_kind, row.contract_version)
    except UnknownOperation:
        return None


def actor_of(admitted: Admitted) -> Actor:
    return Actor(
        user_id=admitted.claims.sub, organization_id=admitted.claims.org, role=admitted.member.role
    )


def scope_of(row: Stored) -> Scope:
    return Scope(
        organization_id=row.organization_id, section=row.section, resource_id=row.resource_id
    )


def _summary(exc: Exception) -> str:
    return summary(exc) if isinstance(exc, ValidationError) else type(exc).__name__
