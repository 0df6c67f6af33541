"""What the executor decides, without I/O: the steps a contract's first transaction can end in,
and the facts and outcomes built from a contract.

The first transaction either concludes the contract (``Concluded``: outcome stored), finds it
concluded already (``Duplicate``), or — for an external operation — commits an attempt that must
now be performed (``Attempting``). Each step knows what its commit must have left in
``executor.executions``, which is how an in-doubt commit is resolved
(``signoff_runtime.unit_of_work``).
"""

from __future__ import annotations

from dataclasses import dataclass

from signoff_contracts.operations import ExecutionContext, Scope
from signoff_contracts.outcomes import NeedsReconciliation, OperationOutcome, RevisionRequired
from signoff_contracts.reasons import APPROVAL_STALE, APPROVER_NO_LONGER_AUTHORIZED, Reason
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import execution

from signoff_executor.repository import Execution


@dataclass(frozen=True, slots=True)
class Concluded:
    """The outcome is stored and in the outbox (this transaction did it)."""

    outcome: OperationOutcome

    def landed(self, row: Execution | None) -> bool:
        return row is not None and row.status == "done"


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Someone concluded this contract before; nothing was executed now."""

    status: str

    def landed(self, row: Execution | None) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Attempting(execution.Attempting):
    """The attempt is committed; the provider may now be called, once."""

    def landed(self, row: Execution | None) -> bool:
        return row is not None and row.status == "attempting" and row.attempt == self.attempt


Step = Concluded | Duplicate | Attempting


def landed(step: object, row: Execution | None) -> bool:
    """Did the transaction that ended in ``step`` commit? (``row``: as it is now)."""
    return isinstance(step, Concluded | Duplicate | Attempting) and step.landed(row)


def scope_of(contract: ExecutionContract) -> Scope:
    return Scope(
        organization_id=contract.organization_id,
        section=contract.section,
        resource_id=contract.resource_id,
    )


def context_of(contract: ExecutionContract) -> ExecutionContext:
    return ExecutionContext(
        proposal_id=contract.proposal_id,
        contract_id=contract.contract_id,
        approved_by=contract.approved_by,
        approved_at=contract.approved_at,
    )


def stale(contract: ExecutionContract) -> RevisionRequired:
    return RevisionRequired(
        reason=Reason(code=APPROVAL_STALE, params={"execute_by": contract.execute_by.isoformat()})
    )


def no_longer_authorized(contract: ExecutionContract, who: str | None = None) -> RevisionRequired:
    """``who``: the approver who may no longer approve (``approved_by`` by default)."""
    return RevisionRequired(
        reason=Reason(
            code=APPROVER_NO_LONGER_AUTHORIZED, params={"approved_by": who or contract.approved_by}
        )
    )


def needs_reconciliation(proposal_id: str) -> NeedsReconciliation:
    return NeedsReconciliation(status_path=f"/v1/proposals/{proposal_id}/reconciliation")
