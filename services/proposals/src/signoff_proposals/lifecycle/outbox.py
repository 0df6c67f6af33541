"""The messages a proposal's state changes cause, written to the outbox in the same transaction.

Events go to the ``events`` topic exchange as ``proposal.<event>``; execution contracts go to the
``contracts`` exchange as ``execution.contract``. The contract is always built from the stored
row (``decided_by``/``decided_at``/``execute_by`` as the claim's UPDATE returned them), so a
copy re-published by the stuck sweep carries the same content and the same signature.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from signoff_contracts.ids import new_id
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import Envelope, ExecutionContract, ProposalEvent
from signoff_runtime import outbox as runtime_outbox
from signoff_runtime import tracing
from signoff_runtime.signing import sign
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import Row, text

from signoff_proposals.context import Context
from signoff_proposals.lifecycle.domain import EventName, routing_key
from signoff_proposals.lifecycle.repository import Tx, view, write_audit
from signoff_proposals.tables import outbox

SOURCE = "proposals"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """An audit row to write together with a transition's messages (``together``)."""

    proposal_id: str
    actor: str
    action: str
    from_status: ProposalStatus | str | None = None
    to_status: ProposalStatus | str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


async def together(
    ctx: Context,
    tx: Tx,
    entry: AuditEntry,
    event: EventName,
    row: Row[Any],
    *,
    contract: ExecutionContract | None = None,
    causation_id: str | None = None,
) -> None:
    """A transition's audit row, its contract (if any) and its event: one statement.

    The same rows as ``write_audit`` + ``send_contract`` + ``announce`` in that order, in one round
    trip instead of three or four (the contract's trace is looked up inside the statement).
    """
    if ctx.direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX: the separate path
        await write_audit(
            tx,
            entry.proposal_id,
            actor=entry.actor,
            action=entry.action,
            from_status=entry.from_status,
            to_status=entry.to_status,
            detail=entry.detail,
        )
        if contract is not None:
            await send_contract(ctx, tx, contract)
        await announce(ctx, tx, event, row, causation_id)
        return
    message = ProposalEvent(
        event=event,
        proposal=view(row),
        source=SOURCE,
        correlation_id=row.id,
        causation_id=causation_id,
    )
    current = json.dumps(tracing.headers())
    params: dict[str, Any] = {
        "a_pid": entry.proposal_id,
        "a_actor": entry.actor,
        "a_action": entry.action,
        "a_from": None if entry.from_status is None else str(entry.from_status),
        "a_to": None if entry.to_status is None else str(entry.to_status),
        "a_detail": json.dumps(entry.detail),
        "channel": runtime_outbox.notify_channel(outbox),
    }
    sent: list[tuple[Envelope, str, str]] = []
    if contract is not None:
        sent.append((contract, ctx.topology.name("contracts"), ROUTING_KEYS["executor.contracts"]))
    sent.append((message, ctx.topology.name("events"), routing_key(event)))
    for i, (envelope, exchange, key) in enumerate(sent):
        params.update(
            {
                f"m{i}_mid": envelope.message_id,
                f"m{i}_ex": exchange,
                f"m{i}_rk": key,
                f"m{i}_mt": envelope.type,
                f"m{i}_cid": envelope.correlation_id,
                f"m{i}_body": envelope.model_dump_json().encode(),
                f"m{i}_headers": current,
            }
        )
    await tx.conn.execute(_together_sql(len(sent), contract is not None), params)


@lru_cache(maxsize=8)
def _together_sql(messages: int, first_is_contract: bool) -> Any:
    """``WITH`` an audit insert, the contract's origin trace and one multi-row outbox insert."""
    parts = [
        "a AS (INSERT INTO proposals.audit "
        "(proposal_id, at, actor, action, from_status, to_status, detail) VALUES "
        "(:a_pid, statement_timestamp(), :a_actor, :a_action, :a_from, :a_to, "
        "CAST(:a_detail AS jsonb)))"
    ]
    if first_is_contract:
        parts.append(
            "origin AS (SELECT jsonb_build_object('traceparent', detail->>'traceparent') AS h "
            "FROM proposals.audit WHERE proposal_id = :a_pid AND action = 'created' "
            "AND detail->>'traceparent' IS NOT NULL LIMIT 1)"
        )
    rows = []
    for i in range(messages):
        origin = (
            " || coalesce((SELECT h FROM origin), '{}'::jsonb)"
            if i == 0 and first_is_contract
            else ""
        )
        rows.append(
            f"(:m{i}_mid, :m{i}_ex, :m{i}_rk, :m{i}_mt, :m{i}_cid, :m{i}_body, "
            f"CAST(:m{i}_headers AS jsonb){origin})"
        )
    values = ", ".join(rows)
    parts.append(
        "ins AS (INSERT INTO proposals.outbox "  # noqa: S608 - placeholders only
        "(message_id, exchange, routing_key, message_type, correlation_id, body, headers) "
        "VALUES " + values + " ON CONFLICT (message_id) DO NOTHING RETURNING 1)"
    )
    notify = " SELECT pg_notify(:channel, '') FROM ins LIMIT 1"
    return text("WITH " + ", ".join(parts) + notify)


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
    return sign(contract, ctx.settings.contracts)


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
