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
import time
from typing import Literal

from signoff_contracts.ids import new_id
from signoff_contracts.operations import ExternalOperation
from signoff_contracts.outcomes import OperationOutcome, Succeeded, TerminalFailure
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_reconciler import metrics, reports, repository
from signoff_reconciler.repository import CheckState

Verdict = Literal["succeeded", "failed"]


class OperatorRefused(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


async def check_now(
    engine: AsyncEngine, proposal_id: str, *, wait_s: float, poll_s: float = 0.2
) -> list[CheckState]:
    """Make the open checks due now and wait until each was checked again or concluded."""
    async with unit_of_work(engine) as uow:
        before = await repository.states(uow.conn, proposal_id)
        if not before:
            raise OperatorRefused("not_found", f"no reconciliation check for {proposal_id}")
        await repository.make_due(uow.conn, proposal_id)
    waiting = {c.id: c.checks for c in before if c.status == "open"}
    deadline = time.monotonic() + wait_s
    while True:
        async with engine.connect() as conn:
            now = await repository.states(conn, proposal_id)
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
        found = await repository.states(uow.conn, proposal_id, lock=True)
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
        await repository.resolve_by_operator(
            uow.conn, target.id, outcome, message_id, verdict=verdict, operator=operator, note=note
        )
        await reports.checked(
            uow.conn, topology, check, "manual", detail=f"{verdict} by {operator}"
        )
        [resolved] = [
            c for c in await repository.states(uow.conn, proposal_id) if c.id == target.id
        ]
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
