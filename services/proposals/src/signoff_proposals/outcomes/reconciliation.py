"""The reconciliation status page: each check of an uncertain attempt, as the reconciler made it.

``record`` stores a ``ReconciliationChecked`` idempotently (the message id is unique: a
redelivered copy inserts nothing); a check for a proposal this service does not know can never
be stored and is dead-lettered (``unknown_proposal``). The check that found the attempt still
inconclusive past the reconciler's bound (``escalated``) is also audited on the proposal
(``escalated``, by ``system:reconciler``) — in the same transaction, so once — and the proposal
stays ``needs_reconciliation``: uncertainty is never settled by a clock. ``page`` is what
``GET /v1/proposals/{id}/reconciliation`` shows — the ``status_path`` of a ``NeedsReconciliation``
outcome: the attempt's state and its check history. ``stuck`` lists the proposals an operator
should look at (``signoff proposals stuck``), escalated ones first.
"""

from __future__ import annotations

from typing import Any

import structlog
from signoff_contracts.v1 import ReconciliationChecked
from signoff_runtime.consumer import PermanentError
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import Row, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.tables import audit, reconciliation_checks

log = structlog.get_logger(__name__)
checks = reconciliation_checks


async def record(ctx: Context, msg: ReconciliationChecked) -> bool:
    """Store one check (and audit an escalation); ``False`` for a duplicate."""
    async with unit_of_work(ctx.engine) as tx:
        conn = tx.conn
        stored = await conn.execute(
            text(
                "INSERT INTO proposals.reconciliation_checks (message_id, proposal_id, "
                "attempt_id, check_number, result, detail, next_check_at, checked_at) "
                "SELECT :mid, p.id, :aid, :n, :result, :detail, :next, :at "
                "FROM proposals.proposals p WHERE p.id = :pid "
                "ON CONFLICT (message_id) DO NOTHING RETURNING 1"
            ),
            {
                "mid": msg.message_id,
                "pid": msg.proposal_id,
                "aid": msg.attempt_id,
                "n": msg.check,
                "result": msg.result,
                "detail": msg.detail,
                "next": msg.next_check_at,
                "at": msg.occurred_at,
            },
        )
        fresh = stored.first() is not None
        if not fresh and await repo.get(conn, msg.proposal_id) is None:
            raise PermanentError("unknown_proposal", f"proposal_id={msg.proposal_id}")
        if fresh and msg.escalated:
            await repo.write_audit(
                tx,
                msg.proposal_id,
                actor=f"system:{msg.source}",
                action="escalated",
                detail={
                    "attempt_id": msg.attempt_id,
                    "check": msg.check,
                    "detail": msg.detail,
                    "next_check_at": None
                    if msg.next_check_at is None
                    else msg.next_check_at.isoformat(),
                    "message_id": msg.message_id,
                },
            )
            log.warning(
                "reconciliation.escalated", proposal_id=msg.proposal_id, attempt_id=msg.attempt_id
            )
    log.debug(
        "reconciliation.checked",
        proposal_id=msg.proposal_id,
        check=msg.check,
        result=msg.result,
        duplicate=not fresh,
    )
    return fresh


async def history(conn: AsyncConnection, proposal_id: str) -> list[dict[str, Any]]:
    rows = await conn.execute(
        checks.select().where(checks.c.proposal_id == proposal_id).order_by(checks.c.id)
    )
    escalations = await conn.execute(
        select(audit.c.detail["message_id"].astext).where(
            audit.c.proposal_id == proposal_id, audit.c.action == "escalated"
        )
    )
    escalated = {message_id for (message_id,) in escalations}
    return [_check_json(row, row.message_id in escalated) for row in rows]


def page(proposal: repo.Stored, found: list[dict[str, Any]]) -> dict[str, Any]:
    """The status page of one proposal: where its uncertain attempt stands, and every check."""
    shown = repo.view(proposal)
    last = found[-1] if found else None
    if last is None:
        state = "awaiting_first_check" if shown.status.value == "needs_reconciliation" else "none"
    elif last["result"] in ("pending", "error") and not shown.status.is_terminal:
        state = "checking"
    else:
        state = "resolved"
    return {
        "proposal_id": shown.id,
        "status": shown.status.value,
        "outcome": None if shown.outcome is None else shown.outcome.model_dump(mode="json"),
        "attempt": None
        if last is None
        else {
            "attempt_id": last["attempt_id"],
            "state": state,
            "checks": len([c for c in found if c["attempt_id"] == last["attempt_id"]]),
            "last_result": last["result"],
            "last_checked_at": last["checked_at"],
            "next_check_at": last["next_check_at"] if state == "checking" else None,
            "escalated": state == "checking"
            and any(c["escalated"] for c in found if c["attempt_id"] == last["attempt_id"]),
        },
        "state": state,
        "checks": found,
    }


async def stuck(conn: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Executing or awaiting reconciliation with the last check made: escalated ones first
    (an operator must conclude them), then oldest claim first."""
    rows = await conn.execute(
        text(
            "SELECT p.id, p.organization_id, p.operation_kind, p.status, p.decided_at, "
            "extract(epoch FROM now() - coalesce(p.decided_at, p.created_at))::float8 AS age_s, "
            "c.check_number, c.result, c.detail, c.checked_at, c.next_check_at, "
            "e.at AS escalated_at "
            "FROM proposals.proposals p LEFT JOIN LATERAL (SELECT * FROM "
            "proposals.reconciliation_checks rc WHERE rc.proposal_id = p.id "
            "ORDER BY rc.id DESC LIMIT 1) c ON true "
            "LEFT JOIN LATERAL (SELECT a.at FROM proposals.audit a WHERE a.proposal_id = p.id "
            "AND a.action = 'escalated' ORDER BY a.id LIMIT 1) e ON true "
            "WHERE p.status IN ('executing', 'needs_reconciliation') "
            "ORDER BY e.at IS NULL, coalesce(p.decided_at, p.created_at), p.id LIMIT :n"
        ),
        {"n": limit},
    )
    return [dict(row._mapping) for row in rows]


def _check_json(row: Row[Any], escalated: bool) -> dict[str, Any]:
    return {
        "check": row.check_number,
        "attempt_id": row.attempt_id,
        "result": row.result,
        "detail": row.detail,
        "checked_at": row.checked_at.isoformat(),
        "next_check_at": None if row.next_check_at is None else row.next_check_at.isoformat(),
        "escalated": escalated,
    }
