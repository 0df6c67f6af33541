"""Revising a pending proposal (the editable payload): one code path for HTTP and AMQP.

A revision never edits a contract. It re-checks the person exactly like an approval (token →
current membership → the organization's own proposal, else 404 → the operation's ``authorize``,
403 and audited), requires the proposal to be pending and unexpired, asks the agent to
``resolve`` the edited request (outside any transaction, with a deadline), and then, in ONE
transaction: a conditional UPDATE moves the old proposal ``pending → superseded`` (guarded by
status AND expiry, so a concurrent approval or the clock wins cleanly), the new proposal is
inserted with a fresh expiry, both are audited, and ``proposal.superseded`` / ``proposal.created``
go to the outbox. If the old one stopped being pending meanwhile, nothing is written and the
answer is the usual 409. Quotas are counted after the swap, so a revision that merely replaces a
proposal always fits.

Over AMQP the command's ``message_id`` is the dedup key: the reply is stored with the inbox row
in the transaction that decided it, and a replay gets that reply. An answer without an effect
because the agent did not answer (5xx) is not stored, so the same command may simply be retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import ValidationError
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import (
    ApprovalReply,
    ProposalRequested,
    ResolveReply,
    ResolveRequested,
)
from signoff_runtime.inbox import first_delivery, store_result, stored_result
from signoff_runtime.registry import UnknownOperation
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals import decide, domain, quotas, resolver
from signoff_proposals import repository as repo
from signoff_proposals.context import Context
from signoff_proposals.domain import Answer
from signoff_proposals.outbox import SOURCE, announce
from signoff_proposals.tables import inbox

log = structlog.get_logger(__name__)
PENDING = ProposalStatus.PENDING
REVISED = Answer("revised")


@dataclass(frozen=True, slots=True)
class _Asked:
    """A revision admitted by the first transaction, and the question for the agent."""

    admitted: decide.Admitted
    question: ResolveRequested


class _Done(Exception):
    """End the current transaction without its writes and answer ``reply``."""

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
    ctx: Context,
    token: str | None,
    proposal_id: str,
    request: dict[str, Any],
    dedup: str | None = None,
) -> ApprovalReply:
    """Admit (transaction 1), ask the agent (no transaction), swap (transaction 2).

    Kept in one function so the three steps and what each may answer read top to bottom.
    """
    try:
        if dedup is not None:
            await _replayed(ctx, dedup)
        async with repo.unit_of_work(ctx.engine) as tx:
            asked = await _admit(ctx, tx, token, proposal_id, request)
            if isinstance(asked, ApprovalReply):
                return await _remember(tx.conn, dedup, asked)
        answer = await resolver.ask(ctx, asked.question)
        if isinstance(answer, resolver.Unavailable):
            return _unavailable(answer.code, asked.admitted.row.id)
        if not answer.accepted:
            refused = _invalid(answer.reason or Reason(code="not_resolvable"), asked.admitted.row)
            async with repo.unit_of_work(ctx.engine) as tx:
                return await _remember(tx.conn, dedup, refused)
        async with repo.unit_of_work(ctx.engine) as tx:
            if dedup is not None and not await first_delivery(tx.conn, inbox, dedup):
                await _replayed_in(tx.conn, dedup)
            reply = await _supersede(ctx, tx, asked, answer)
            return await _remember(tx.conn, dedup, reply, recorded=True)
    except _Done as done:
        return done.reply


async def _admit(
    ctx: Context, tx: repo.Tx, token: str | None, proposal_id: str, request: dict[str, Any]
) -> _Asked | ApprovalReply:
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
    try:
        op.parse_request(request)
    except ValidationError:
        return _invalid(Reason(code="invalid_request", params={"kind": row.operation_kind}), row)
    question = ResolveRequested(
        proposal_id=row.id,
        organization_id=row.organization_id,
        requested_by=admitted.claims.sub,
        section=row.section,
        resource_id=row.resource_id,
        operation_kind=row.operation_kind,
        contract_version=row.contract_version,
        request=request,
        source=SOURCE,
        correlation_id=row.id,
    )
    return _Asked(admitted, question)


async def _supersede(
    ctx: Context, tx: repo.Tx, asked: _Asked, answer: ResolveReply
) -> ApprovalReply:
    old_row = asked.admitted.row
    new, op = _new_proposal(ctx, asked, answer)
    await quotas.lock_organization(tx.conn, quotas.PROPOSALS_LOCK, old_row.organization_id)
    old = await repo.transition(
        tx,
        old_row.id,
        expected=[PENDING],
        to=ProposalStatus.SUPERSEDED,
        unexpired=True,
        organization_id=old_row.organization_id,
        values={"superseded_by": new.proposal_id},
    )
    if old is None:
        return await decide.after_lost_claim(ctx, tx, old_row.id)
    created = await repo.insert_proposal(tx, new, op.ttl)
    assert created is not None, "a fresh id cannot collide"
    await _check_quota(ctx, tx, new)
    actor = asked.admitted.claims.sub
    await repo.write_audit(
        tx,
        old.id,
        actor=actor,
        action="superseded",
        from_status=PENDING,
        to_status=ProposalStatus.SUPERSEDED,
        detail={"superseded_by": created.id},
    )
    await repo.write_audit(
        tx,
        created.id,
        actor=actor,
        action="created",
        to_status=PENDING,
        detail={"supersedes": old.id},
    )
    await announce(ctx, tx, "superseded", old)
    await announce(ctx, tx, "created", created)
    log.info("proposal.revised", proposal_id=old.id, superseded_by=created.id)
    return decide.reply(REVISED, created).model_copy(update={"correlation_id": old.id})


def _new_proposal(
    ctx: Context, asked: _Asked, answer: ResolveReply
) -> tuple[ProposalRequested, AnyOperation]:
    """The replacement, from the old row and the agent's resolution; ``_Done`` if unusable."""
    old = asked.admitted.row
    version = answer.contract_version or old.contract_version
    op = _operation(ctx, old.operation_kind, version)
    try:
        if op is None or answer.arguments is None or answer.preview is None:
            raise ValueError("incomplete resolution")
        request = answer.request if answer.request is not None else asked.question.request
        op.parse_request(request)
        op.parse_arguments(answer.arguments)
        op.parse_preview(answer.preview)
        proposal_id = new_id("prp")
        new = ProposalRequested(
            proposal_id=proposal_id,
            organization_id=old.organization_id,
            requested_by=asked.admitted.claims.sub,
            conversation_id=old.conversation_id,
            section=old.section,
            resource_id=old.resource_id,
            operation_kind=old.operation_kind,
            contract_version=version,
            request=request,
            arguments=answer.arguments,
            preview=answer.preview,
            supersedes=old.id,
            source=SOURCE,
            correlation_id=proposal_id,
        )
    except (ValueError, ValidationError):
        log.error("revision.agent_reply_unusable", proposal_id=old.id, version=version)
        raise _Done(_unavailable("agent_reply_invalid", old.id)) from None
    return new, op


async def _check_quota(ctx: Context, tx: repo.Tx, new: ProposalRequested) -> None:
    group = ctx.settings.proposals
    excess = await quotas.excess(
        tx.conn,
        "proposals",
        new.organization_id,
        new.conversation_id,
        per_conversation=group.max_pending_per_conversation,
        per_organization=group.max_pending_per_organization,
    )
    if excess is not None:
        # raised inside the transaction: the swap and the inbox row roll back with it
        refused = decide.reply(Answer("rate_limited", reason=excess.code))
        raise _Done(refused.model_copy(update={"reason": excess}))


async def _remember(
    conn: AsyncConnection, dedup: str | None, reply: ApprovalReply, *, recorded: bool = False
) -> ApprovalReply:
    """Store ``reply`` beside the command's inbox row (AMQP only) in the deciding transaction."""
    if dedup is None:
        return reply
    reply = reply.model_copy(update={"causation_id": dedup})
    if not recorded and not await first_delivery(conn, inbox, dedup):
        await _replayed_in(conn, dedup)
    await store_result(conn, inbox, dedup, reply.model_dump(mode="json"))
    return reply


async def _replayed(ctx: Context, dedup: str) -> None:
    """Raise ``_Done`` with the stored reply if command ``dedup`` was answered already."""
    async with ctx.engine.connect() as conn:
        stored = await stored_result(conn, inbox, dedup)
    if stored is not None:
        raise _Done(ApprovalReply.model_validate(stored))


async def _replayed_in(conn: AsyncConnection, dedup: str) -> None:
    stored = await stored_result(conn, inbox, dedup)
    if stored is None:  # a concurrent first delivery is still deciding: answer like a retry
        raise _Done(_unavailable("command_in_progress", None))
    raise _Done(ApprovalReply.model_validate(stored))


def _operation(ctx: Context, kind: str, version: int) -> AnyOperation | None:
    try:
        return ctx.operations.get(kind, version)
    except UnknownOperation:
        return None


def _invalid(reason: Reason, row: Any) -> ApprovalReply:
    reply = decide.reply(Answer("invalid", reason=reason.code), row)
    return reply.model_copy(update={"reason": reason})


def _unavailable(code: str, proposal_id: str | None) -> ApprovalReply:
    status = 502 if code == "agent_reply_invalid" else 503
    return ApprovalReply(
        result="invalid",
        http_status=status,
        reason=Reason(code=code),
        source=SOURCE,
        correlation_id=proposal_id,
    )
