"""The messages a check causes, written to the reconciler's outbox in the check's transaction.

``OutcomeReported`` (exchange ``outcomes``, routing key ``execution.outcome``) carries the
authoritative outcome to the proposals service; ``ReconciliationChecked`` (routing key
``execution.reconciliation_checked``) records every check, conclusive or not, for the proposal's
status page (and, with ``escalated``, the one check that found it inconclusive past the bound).
An outcome needs the contract id (the proposals service ignores a report for another
contract): a check the stranded scan opened without one has its report withheld until a
``ReconciliationRequired`` names the contract (``withheld``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.v1 import OutcomeReported, ReconciliationChecked
from signoff_runtime.outbox import Outgoing, enqueue
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_reconciler.repository import Check
from signoff_reconciler.tables import outbox

SOURCE = "reconciler"
CheckResult = Literal["pending", "applied", "not_applied", "error", "manual"]


def result_of(outcome: OperationOutcome) -> CheckResult:
    """What a conclusive check found, in the status page's words."""
    if outcome.type == "succeeded":
        return "applied"
    if outcome.type == "revision_required":
        return "not_applied"
    return "error"


async def outcome(
    conn: AsyncConnection,
    topology: Topology,
    check: Check,
    concluded: OperationOutcome,
    *,
    message_id: str | None = None,
    operator: str | None = None,
    note: str | None = None,
) -> str | None:
    """Enqueue the outcome report; its message id, or ``None`` when withheld (no contract)."""
    if check.contract_id is None:
        return None
    message = OutcomeReported(
        message_id=message_id or new_id("msg"),
        source=SOURCE,
        correlation_id=check.proposal_id,
        causation_id=check.required_message_id,
        proposal_id=check.proposal_id,
        contract_id=check.contract_id,
        operation_kind=check.operation_kind,
        outcome=concluded,
        reported_by="operator" if operator is not None else "reconciler",
        operator=operator,
        note=note,
    )
    out = Outgoing(message, topology.name("outcomes"), ROUTING_KEYS["proposals.outcomes"])
    await enqueue(conn, outbox, [out])
    return message.message_id


async def checked(
    conn: AsyncConnection,
    topology: Topology,
    check: Check,
    result: CheckResult,
    *,
    detail: str | None = None,
    next_check_at: datetime | None = None,
    escalated: bool = False,
) -> None:
    """Enqueue the record of check number ``check.checks + 1``."""
    message = ReconciliationChecked(
        source=SOURCE,
        correlation_id=check.proposal_id,
        causation_id=check.required_message_id,
        proposal_id=check.proposal_id,
        attempt_id=check.attempt_id,
        check=check.checks + 1,
        result=result,
        detail=None if detail is None else detail[:500],
        next_check_at=next_check_at,
        escalated=escalated,
    )
    out = Outgoing(message, topology.name("outcomes"), ROUTING_KEYS["proposals.reconciliation"])
    await enqueue(conn, outbox, [out])
