"""The service's one writer of outbox rows: messages, with the audit rows they go with.

``enqueue`` writes its messages — and the audit rows that record the same change — in ONE
statement (``signoff_runtime.outbox.enqueue_statement``), in the caller's transaction: a change
is never audited without its messages, nor announced without its audit row. Transitions
(``transitions``), the stuck sweep's contract copies and pause points all write through it.

Events go to the ``events`` topic exchange (``proposal.<event>``, ``pause_point.<…>``), those of a
conversation's proposals and pause points through ``conversation-events``; execution
contracts go to the ``contracts`` exchange as ``execution.contract``. The contract is always
built from the stored row (``decided_by``/``decided_at``/``execute_by`` as the claim's UPDATE
returned them), so a copy re-published by the stuck sweep carries the same content and the same
signature — and the trace of the turn that proposed it (``repository.origin_trace``).
"""

from __future__ import annotations

from collections.abc import Sequence

from signoff_contracts.v1 import Envelope, ExecutionContract, ProposalEvent
from signoff_runtime import outbox as runtime_outbox
from signoff_runtime import signing, tracing
from signoff_runtime.outbox import Hold, Outgoing
from signoff_runtime.topology import ROUTING_KEYS, events_exchange
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.lifecycle.domain import EventName, routing_key
from signoff_proposals.lifecycle.repository import (
    AuditEntry,
    Stored,
    audit_change,
    audit_insert,
    view,
)
from signoff_proposals.policies.views import approvers_of
from signoff_proposals.tables import outbox

SOURCE = "proposals"


async def enqueue(
    ctx: Context,
    tx: UnitOfWork,
    messages: Sequence[Outgoing],
    *,
    audit: Sequence[AuditEntry] = (),
) -> None:
    """Write ``audit`` rows and enqueue ``messages``: one statement, the caller's transaction
    (fixed SQL prepared by asyncpg: every claim, outcome and expiry writes through here)."""
    hold = _holder(ctx, tx)
    if hold is not None:
        await runtime_outbox.enqueue(
            tx.conn, outbox, messages, change=audit_insert(audit) if audit else None, hold=hold
        )
        return
    change = audit_change(audit) if audit else None
    await runtime_outbox.enqueue_hot(tx.conn, outbox, messages, change=change)


def event(ctx: Context, name: EventName, row: Stored, causation_id: str | None = None) -> Outgoing:
    """``proposal.<name>`` announcing ``row`` as it now stands."""
    message = ProposalEvent(
        event=name,
        proposal=view(row),
        source=SOURCE,
        correlation_id=row.id,
        causation_id=causation_id,
    )
    return announcement(ctx, message, routing_key(name), message.proposal.conversation_id)


def announcement(
    ctx: Context, message: Envelope, key: str, conversation_id: str | None
) -> Outgoing:
    """``message`` under ``key`` to ``events``, or to ``conversation-events`` (which forwards it
    to ``events``) if it is about a conversation's proposal or pause point: only those reach the
    agent, which has nothing to hand back for the others (``topology.events_exchange``)."""
    return Outgoing(message, ctx.topology.name(events_exchange(conversation_id)), key)


def contract(ctx: Context, row: Stored) -> tuple[ExecutionContract, Outgoing]:
    """The signed contract of a claimed proposal (fresh envelope, identical signed content), and
    its outbox message. ``row`` carries ``origin_trace`` (``repository.origin_trace``)."""
    signed = signing.issue(
        ctx.settings.contracts,
        proposal_id=row.id,
        contract_id=row.contract_id,
        organization_id=row.organization_id,
        section=row.section,
        resource_id=row.resource_id,
        operation_kind=row.operation_kind,
        contract_version=row.contract_version,
        arguments=row.arguments,
        approved_by=row.decided_by,
        approvers=approvers_of(row),
        approved_at=row.decided_at,
        execute_by=row.execute_by,
    )
    headers = {tracing.HEADER: row.origin_trace} if row.origin_trace else None
    key = ROUTING_KEYS["executor.contracts"]
    return signed, Outgoing(signed, ctx.topology.name("contracts"), key, headers)


def _holder(ctx: Context, tx: UnitOfWork) -> Hold | None:
    """The negative control ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``: no outbox row, one
    best-effort publish once the transaction commits."""
    direct = ctx.direct
    if direct is None:
        return None

    def hold(out: Outgoing) -> None:
        headers = dict(out.headers or {})
        tx.after_commit(
            lambda: direct.publish(
                out.message, exchange=out.exchange, routing_key=out.routing_key, headers=headers
            )
        )

    return hold
