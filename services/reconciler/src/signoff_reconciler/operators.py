"""What an operator may do to a check: look, ask now, or resolve it by hand (audited).

``check_now`` makes a proposal's open checks due at once and waits — with a deadline — until a
running reconciler has checked each (or concluded it); it never asks the provider itself, so
there is still exactly one place that does. ``resolve`` is for when the provider's dashboard
says what its API cannot: in one transaction holding the check row (a reconciler mid-check
finishes first), the operation records the verdict in its domain (``settle_by_operator``), the
check is resolved by the operator with their note, and ``OutcomeReported(reported_by="operator")``
and a ``manual`` check record go to the outbox. A resolved check is refused a second time; an
escalated one (still open, past the reconciler's bound) is resolved like any open check, and so
is a ``gave_up`` one left from before escalation replaced giving up.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from signoff_contracts.ids import new_id
from signoff_contracts.operations import ExternalOperation
from signoff_contracts.outcomes import OperationOutcome, Succeeded, TerminalFailure
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_reconciler import metrics, reports
from signoff_reconciler.repository import Check

Verdict = Literal["succeeded", "failed"]
_STATE = (
    "id, attempt_id, proposal_id, contract_id, operation_kind, contract_version, "
    "required_message_id, checks, extract(epoch FROM now() - created_at)::float8 AS age_s, "
    "status, found_by, last_result, last_checked_at, next_check_at, outcome, resolved_by, "
    "operator, note, created_at, resolved_at, escalated_at"
)


@dataclass(frozen=True, slots=True)
class CheckState:
    id: int
    attempt_id: str
    proposal_id: str
    contract_id: str | None
    operation_kind: str
    contract_version: int
    required_message_id: str | None
    checks: int
    age_s: float
    status: str
    found_by: str
    last_result: dict[str, Any] | None
    last_checked_at: datetime | None
    next_check_at: datetime
    outcome: dict[str, Any] | None
    resolved_by: str | None
    operator: str | None
    note: str | None
    created_at: datetime
    resolved_at: datetime | None
    escalated_at: datetime | None = None

    def as_check(self) -> Check:
        return Check(
            id=self.id,
            attempt_id=self.attempt_id,
            proposal_id=self.proposal_id,
            contract_id=self.contract_id,
            operation_kind=self.operation_kind,
            contract_version=self.contract_version,
            required_message_id=self.required_message_id,
            checks=self.checks,
            age_s=self.age_s,
            escalated=self.escalated_at is not None,
        )


class OperatorRefused(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


async def states(
    conn: AsyncConnection, proposal_id: str, *, lock: bool = False
) -> list[CheckState]:
    """The proposal's checks (one per attempt), oldest first."""
    rows = await conn.execute(
        text(
            f"SELECT {_STATE} FROM reconciler.checks WHERE proposal_id = :p "  # noqa: S608
            f"ORDER BY id{' FOR UPDATE' if lock else ''}"
        ),
        {"p": proposal_id},
    )
    return [CheckState(**row._mapping) for row in rows]


async def check_now(
    engine: AsyncEngine, proposal_id: str, *, wait_s: float, poll_s: float = 0.2
) -> list[CheckState]:
    """Make the open checks due now and wait until each was checked again or concluded."""
    async with unit_of_work(engine) as uow:
        before = await states(uow.conn, proposal_id)
        if not before:
            raise OperatorRefused("not_found", f"no reconciliation check for {proposal_id}")
        await uow.conn.execute(
            text(
                "UPDATE reconciler.checks SET next_check_at = now() "
                "WHERE proposal_id = :p AND status = 'open'"
            ),
            {"p": proposal_id},
        )
    waiting = {c.id: c.checks for c in before if c.status == "open"}
    deadline = time.monotonic() + wait_s
    while True:
        async with engine.connect() as conn:
            now = await states(conn, proposal_id)
        if all(c.status != "open" or c.checks > waiting[c.id] for c in now if c.id in waiting):
            return now
        if time.monotonic() > deadline:
            raise OperatorRefused(
                "timeout",
                f"no reconciler checked {proposal_id} within {wait_s:g}s; is one running?",
            )
        await asyncio.sleep(poll_s)


async def resolve(
    engine: AsyncEngine,
    topology: Topology,
    operations: Operations,
    proposal_id: str,
    *,
    verdict: Verdict,
    operator: str,
    note: str,
) -> tuple[CheckState, OperationOutcome]:
    """Resolve the proposal's unresolved check by hand; the outcome reported."""
    async with unit_of_work(engine) as uow:
        found = await states(uow.conn, proposal_id, lock=True)
        if not found:
            raise OperatorRefused("not_found", f"no reconciliation check for {proposal_id}")
        target = next((c for c in found if c.status in ("open", "gave_up")), None)
        if target is None:
            last = found[-1]
            raise OperatorRefused(
                "already_resolved",
                f"{last.attempt_id} was resolved by {last.operator or last.resolved_by} "
                f"at {last.resolved_at.isoformat() if last.resolved_at else '?'}",
            )
        outcome = await _settle(uow.conn, operations, target, verdict)
        check = target.as_check()
        message_id = await reports.outcome(
            uow.conn, topology, check, outcome, operator=operator, note=note
        )
        await uow.conn.execute(
            text(
                "UPDATE reconciler.checks SET status = 'resolved', checks = checks + 1, "
                "last_checked_at = now(), resolved_at = now(), "
                "outcome = CAST(:outcome AS jsonb), outcome_message_id = :mid, "
                "last_result = CAST(:result AS jsonb), resolved_by = 'operator', "
                "operator = :operator, note = :note, lease_owner = NULL, lease_until = NULL "
                "WHERE id = :id AND status IN ('open', 'gave_up')"
            ),
            {
                "id": target.id,
                "outcome": json.dumps(outcome.model_dump(mode="json")),
                "mid": message_id,
                "result": json.dumps({"result": "manual", "verdict": verdict}),
                "operator": operator,
                "note": note,
            },
        )
        await reports.checked(
            uow.conn, topology, check, "manual", detail=f"{verdict} by {operator}"
        )
        [resolved] = [c for c in await states(uow.conn, proposal_id) if c.id == target.id]
    metrics.OPERATOR_RESOLUTIONS.labels(verdict).inc()
    return resolved, outcome


async def _settle(
    conn: AsyncConnection, operations: Operations, check: CheckState, verdict: Verdict
) -> OperationOutcome:
    """The domain's record of the verdict, or a generic outcome when it keeps none."""
    applied = verdict == "succeeded"
    try:
        op = operations.get(check.operation_kind, check.contract_version)
    except UnknownOperation:
        op = None
    outcome = None
    if isinstance(op, ExternalOperation):
        outcome = await op.settle_by_operator(check.attempt_id, conn, applied=applied)
    if outcome is not None:
        return outcome
    return Succeeded(result={}) if applied else TerminalFailure(correlation_id=new_id("cor"))
