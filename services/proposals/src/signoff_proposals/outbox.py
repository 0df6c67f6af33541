"""The messages a proposal's state changes cause, written to the outbox in the same transaction.

Events go to the ``events`` topic exchange as ``proposal.<event>``; execution contracts go to the
``contracts`` exchange as ``execution.contract``. The contract is always built from the stored
row (``decided_by``/``decided_at``/``execute_by`` as the claim's UPDATE returned them), so a
copy re-published by the stuck sweep carries the same content and the same signature.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.ids import new_id
from signoff_contracts.v1 import Envelope, ExecutionContract, ProposalEvent
from signoff_runtime import outbox as runtime_outbox
from signoff_runtime import tracing
from signoff_runtime.signing import sign
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import Row, text

from signoff_proposals.context import Context
from signoff_proposals.domain import EventName, routing_key
from signoff_proposals.repository import Tx, view
from signoff_proposals.tables import outbox

SOURCE = "proposals"


async def announce(
    ctx: Context, tx: Tx, event: EventName, row: Row[Any], causation_id: str | None = None
) -> None:
    message = ProposalEvent(
        event=event,
        proposal=view(row),
        source=SOURCE,
        correlation_id=row.id,
        causation_id=causation_id,
    )
    if ctx.direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX
        _publish_after_commit(ctx, tx, message, "events", routing_key(event))
        return
    await runtime_outbox.enqueue(
        tx.conn,
        outbox,
        message,
        exchange=ctx.topology.name("events"),
        routing_key=routing_key(event),
    )


def contract_for(ctx: Context, row: Row[Any]) -> ExecutionContract:
    """The signed contract of a claimed proposal (fresh envelope, identical signed content)."""
    contract = ExecutionContract(
        message_id=new_id("msg"),
        source=SOURCE,
        correlation_id=row.id,
        contract_id=row.contract_id,
        proposal_id=row.id,
        organization_id=row.organization_id,
        section=row.section,
        resource_id=row.resource_id,
        operation_kind=row.operation_kind,
        contract_version=row.contract_version,
        arguments=row.arguments,
        approved_by=row.decided_by,
        approved_at=row.decided_at,
        execute_by=row.execute_by,
    )
    return sign(contract, ctx.settings.contracts.signing_key)


async def send_contract(ctx: Context, tx: Tx, contract: ExecutionContract) -> None:
    """The contract carries the trace of the turn that proposed it, not the approver's."""
    origin = await tx.conn.scalar(
        text(
            "SELECT detail->>'traceparent' FROM proposals.audit "
            "WHERE proposal_id = :id AND action = 'created' LIMIT 1"
        ),
        {"id": contract.proposal_id},
    )
    if ctx.direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX
        headers = {tracing.HEADER: origin} if origin else None
        _publish_after_commit(
            ctx, tx, contract, "contracts", ROUTING_KEYS["executor.contracts"], headers
        )
        return
    await runtime_outbox.enqueue(
        tx.conn,
        outbox,
        contract,
        exchange=ctx.topology.name("contracts"),
        routing_key=ROUTING_KEYS["executor.contracts"],
        headers={tracing.HEADER: origin} if origin else None,
    )


def _publish_after_commit(
    ctx: Context,
    tx: Tx,
    message: Envelope,
    exchange: str,
    key: str,
    headers: dict[str, str] | None = None,
) -> None:
    """The negative control: no outbox row, one best-effort publish once the transaction commits."""
    direct, name = ctx.direct, ctx.topology.name(exchange)
    assert direct is not None
    tx.defer(lambda: direct.publish(message, exchange=name, routing_key=key, headers=headers))
