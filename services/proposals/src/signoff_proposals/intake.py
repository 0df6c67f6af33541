"""Storing a resolved proposal (``ProposalRequested``), idempotently by its id.

The proposal row is its own dedup record: ``INSERT … ON CONFLICT DO NOTHING`` either stores it
or finds the earlier copy, which is returned unchanged. A revision (``supersedes``) replaces a
still-pending proposal in the same transaction, or is refused and stores nothing. The quotas
(``quotas``) are counted under the organization's lock after the insert, and an excess is
refused (``conversation_quota_exceeded`` / ``organization_quota_exceeded``), storing nothing.
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import ProposalRequested, ProposalRequestReply
from signoff_runtime import tracing
from signoff_runtime.registry import UnknownOperation

from signoff_proposals import quotas
from signoff_proposals import repository as repo
from signoff_proposals.context import Context
from signoff_proposals.outbox import SOURCE, announce

log = structlog.get_logger(__name__)


class Refused(Exception):
    """The request cannot be stored as it is; raised inside the transaction to roll it back."""

    def __init__(self, code: str, **params: str | int | None) -> None:
        super().__init__(code)
        self.reason = Reason(code=code, params=params)


async def store(ctx: Context, msg: ProposalRequested) -> ProposalRequestReply:
    try:
        _check_operation(ctx, msg)
        async with repo.unit_of_work(ctx.engine) as tx:
            row = await _store(ctx, tx, msg)
    except Refused as refused:
        log.info("proposal.refused", proposal_id=msg.proposal_id, reason=refused.reason.code)
        return _reply(msg, accepted=False, reason=refused.reason)
    return _reply(msg, accepted=True, row=row)


def _check_operation(ctx: Context, msg: ProposalRequested) -> None:
    """The stored contract must be one this deployment knows and can parse back later."""
    try:
        op = ctx.operations.get(msg.operation_kind, msg.contract_version)
    except UnknownOperation:
        raise Refused(
            "unknown_operation", kind=msg.operation_kind, version=msg.contract_version
        ) from None
    try:
        op.parse_arguments(msg.arguments)
    except ValidationError:
        raise Refused("invalid_arguments", kind=msg.operation_kind) from None
    try:
        op.parse_preview(msg.preview)
    except ValidationError:
        raise Refused("invalid_preview", kind=msg.operation_kind) from None


async def _store(ctx: Context, tx: repo.Tx, msg: ProposalRequested) -> Any:
    op = ctx.operations.get(msg.operation_kind, msg.contract_version)
    await quotas.lock_organization(tx.conn, quotas.PROPOSALS_LOCK, msg.organization_id)
    row = await repo.insert_proposal(tx, msg, op.ttl)
    if row is None:
        stored = await repo.get(tx.conn, msg.proposal_id)
        if stored is None or stored.organization_id != msg.organization_id:
            raise Refused("proposal_id_conflict")
        log.info("proposal.duplicate_request", proposal_id=msg.proposal_id)
        return stored
    if msg.supersedes is not None:
        await _supersede(ctx, tx, msg)
    await _check_quota(ctx, tx, msg)
    await repo.write_audit(
        tx,
        row.id,
        actor=msg.requested_by,
        action="created",
        to_status=ProposalStatus.PENDING,
        detail={
            **({"supersedes": msg.supersedes} if msg.supersedes else {}),
            **tracing.headers(),
        }
        or None,
    )
    await announce(ctx, tx, "created", row, causation_id=msg.message_id)
    log.info("proposal.stored", proposal_id=row.id, kind=row.operation_kind)
    return row


async def _supersede(ctx: Context, tx: repo.Tx, msg: ProposalRequested) -> None:
    assert msg.supersedes is not None
    old = await repo.transition(
        tx,
        msg.supersedes,
        expected=[ProposalStatus.PENDING],
        to=ProposalStatus.SUPERSEDED,
        organization_id=msg.organization_id,
        values={"superseded_by": msg.proposal_id},
    )
    if old is None:
        raise Refused("not_pending", proposal_id=msg.supersedes)
    await repo.write_audit(
        tx,
        old.id,
        actor=msg.requested_by,
        action="superseded",
        from_status=ProposalStatus.PENDING,
        to_status=ProposalStatus.SUPERSEDED,
        detail={"superseded_by": msg.proposal_id},
    )
    await announce(ctx, tx, "superseded", old, causation_id=msg.message_id)


async def _check_quota(ctx: Context, tx: repo.Tx, msg: ProposalRequested) -> None:
    group = ctx.settings.proposals
    excess = await quotas.excess(
        tx.conn,
        "proposals",
        msg.organization_id,
        msg.conversation_id,
        per_conversation=group.max_pending_per_conversation,
        per_organization=group.max_pending_per_organization,
    )
    if excess is not None:
        raise Refused(excess.code, **excess.params)


def _reply(
    msg: ProposalRequested, *, accepted: bool, row: Any = None, reason: Reason | None = None
) -> ProposalRequestReply:
    return ProposalRequestReply(
        accepted=accepted,
        proposal=None if row is None else repo.view(row),
        reason=reason,
        source=SOURCE,
        correlation_id=msg.proposal_id,
        causation_id=msg.message_id,
    )


def invalid_request(correlation_id: str | None) -> ProposalRequestReply:
    """The reply to a request that did not even parse (when it left a reply address)."""
    return ProposalRequestReply(
        accepted=False,
        reason=Reason(code="invalid_message"),
        source=SOURCE,
        correlation_id=correlation_id,
    )
