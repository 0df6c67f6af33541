"""Proposal intake: the agent asks, this service makes the contract and stores it.

A v2 ``ProposalRequested`` names an operation, its model-facing ``Request``, the resource and
who it speaks for (``identity``). In ONE transaction: the person is identified and their current
membership read; the operation's ``may_propose`` must accept their role (a viewer may not fill
the organization's approval queue); their rate (``SIGNOFF_LIMITS__PROPOSALS_PER_MINUTE``) is
taken; the operation's ``resolve`` runs read-only (``resolving``); and the proposal is stored
with the ``Arguments`` and ``Preview`` of that very call, audited and announced. Each refusal is
typed (``ProposalRequestReply.refusal``) and stores nothing.

The proposal row is its own dedup record: a request for an id already stored — a redelivery, or
a retry under the endpoint's idempotency key — is answered with the stored proposal, for the
same person only, and resolves nothing. The quotas (``quotas``) are counted under the
organization's lock as the transaction's last statement; an excess rolls the insert back.

A v1 request (arguments and preview of the agent's making) is refused (``unsupported_version``);
only the negative control ``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT`` stores it as sent.
"""

from __future__ import annotations

import math
from typing import Any

import structlog
from signoff_contracts.operations import Actor, Scope
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import ProposalRequestReply
from signoff_contracts.v2 import ProposalRequested
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work

from signoff_proposals.context import Context
from signoff_proposals.intake import identity, quotas, resolving
from signoff_proposals.intake.resolving import Refused
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.outbox import SOURCE
from signoff_proposals.lifecycle.transitions import create
from signoff_proposals.policies import freezing

log = structlog.get_logger(__name__)


async def store(ctx: Context, msg: ProposalRequested) -> ProposalRequestReply:
    try:
        async with unit_of_work(ctx.engine) as tx:
            row = await _resolve_and_store(ctx, tx, msg)
    except (identity.NotIdentified, Refused) as exc:
        return refused(msg.proposal_id, msg.message_id, exc.refusal, exc.reason)
    return accepted(msg.proposal_id, msg.message_id, row)


async def _resolve_and_store(ctx: Context, tx: UnitOfWork, msg: ProposalRequested) -> Any:
    try:
        op = ctx.operations.get(msg.operation_kind, msg.contract_version)
    except UnknownOperation:
        raise Refused(
            "invalid", "unknown_operation", kind=msg.operation_kind, version=msg.contract_version
        ) from None
    person = await identity.identify(
        ctx,
        tx.conn,
        token=msg.token,
        resumed_from=msg.resumed_from,
        conversation_id=msg.conversation_id,
    )
    scope = Scope(
        organization_id=person.organization_id, section=op.section, resource_id=msg.resource_id
    )
    actor = Actor(
        user_id=person.user_id, organization_id=person.organization_id, role=person.member.role
    )
    if not op.may_propose(actor, scope):
        raise Refused("forbidden", "forbidden", why="role", role=person.member.role)
    stored = await repo.get(tx.conn, msg.proposal_id)
    if stored is not None:
        return _duplicate(stored, person)
    _take_rate(ctx, person)
    request = resolving.parse_request(op, msg.request)
    arguments, preview = await resolving.resolve(tx.conn, op, request, scope)
    new = repo.NewProposal(
        proposal_id=msg.proposal_id,
        organization_id=person.organization_id,
        requested_by=person.user_id,
        conversation_id=msg.conversation_id,
        section=op.section,
        resource_id=msg.resource_id,
        operation_kind=op.kind,
        contract_version=op.version,
        request=request.model_dump(mode="json"),
        arguments=arguments,
        preview=preview,
    )
    detail = {"via": person.via, **({"resumed_from": msg.resumed_from} if msg.resumed_from else {})}
    return await insert(ctx, tx, new, causation_id=msg.message_id, detail=detail)


async def insert(
    ctx: Context,
    tx: UnitOfWork,
    new: repo.NewProposal,
    *,
    causation_id: str,
    detail: dict[str, Any],
) -> Any:
    """Store ``new`` (quota-checked, audited, announced); the stored copy if its id exists."""
    op = ctx.operations.get(new.operation_kind, new.contract_version)
    row = await create(ctx, tx, new, op.ttl, detail=detail, causation_id=causation_id)
    if row is None:  # a concurrent copy of the same request won the insert
        stored = await repo.get(tx.conn, new.proposal_id)
        if stored is None or stored.organization_id != new.organization_id:
            raise Refused("not_stored", "proposal_id_conflict")
        return stored
    row = await freezing.freeze(tx, op, row)
    await _check_quota(ctx, tx, new)
    log.info("proposal.stored", proposal_id=row.id, kind=row.operation_kind)
    return row


def _duplicate(stored: Any, person: identity.Person) -> Any:
    """A request for an id already stored: the stored proposal, to the person who asked only."""
    if stored.organization_id != person.organization_id or stored.requested_by != person.user_id:
        raise Refused("not_stored", "proposal_id_conflict")
    log.info("proposal.duplicate_request", proposal_id=stored.id)
    return stored


def _take_rate(ctx: Context, person: identity.Person) -> None:
    wait = ctx.propose_rate.take(f"{person.organization_id}/{person.user_id}")
    if wait > 0:
        log.info("proposal.rate_limited", user=person.user_id)
        raise Refused(
            "rate_limited",
            "rate_limited",
            bucket="proposals",
            retry_after_s=max(1, math.ceil(wait)),
        )


async def _check_quota(ctx: Context, tx: UnitOfWork, new: repo.NewProposal) -> None:
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
        raise Refused("not_stored", excess.code, **excess.params)


def refused(
    proposal_id: str | None, causation_id: str | None, refusal: Any, reason: Reason
) -> ProposalRequestReply:
    log.info("proposal.refused", proposal_id=proposal_id, reason=reason.code, refusal=refusal)
    reply = _reply(proposal_id, causation_id, accepted=False, reason=reason)
    return reply.model_copy(update={"refusal": refusal})


def accepted(proposal_id: str, causation_id: str, row: Any) -> ProposalRequestReply:
    return _reply(proposal_id, causation_id, accepted=True, row=row)


def _reply(
    proposal_id: str | None,
    causation_id: str | None,
    *,
    accepted: bool,
    row: Any = None,
    reason: Reason | None = None,
) -> ProposalRequestReply:
    return ProposalRequestReply(
        accepted=accepted,
        proposal=None if row is None else repo.view(row),
        reason=reason,
        source=SOURCE,
        correlation_id=proposal_id,
        causation_id=causation_id,
    )


def invalid_request(correlation_id: str | None) -> ProposalRequestReply:
    """The reply to a request that did not even parse (when it left a reply address)."""
    return refused(correlation_id, None, "invalid", Reason(code="invalid_message"))
