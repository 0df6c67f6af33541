"""The messages a concluded contract causes, written to the executor's outbox.

``OutcomeReported`` and ``ReconciliationRequired`` are only ever written here, in the transaction
that stores the outcome, and published by the relay — never returned from a handler, so a commit
cannot happen without its message nor a message without its commit.

Their message ids are stored with the outcome: a repeated delivery of a finished contract
re-publishes the *same* message (``republish``), which heals an outcome lost downstream without
ever giving the proposals service two different answers.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.ids import new_id
from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import NeedsReconciliation, OperationOutcome
from signoff_contracts.v1 import (
    Envelope,
    ExecutionContract,
    OutcomeReported,
    ReconciliationRequired,
)
from signoff_runtime import hot
from signoff_runtime.outbox import Outgoing, enqueue_hot
from signoff_runtime.topology import ROUTING_KEYS, Topology
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_executor import repository
from signoff_executor.repository import Execution
from signoff_executor.tables import outbox

SOURCE = "executor"
OUTCOME_KEY = ROUTING_KEYS["proposals.outcomes"]  # execution.outcome
RECONCILIATION_KEY = ROUTING_KEYS["reconciler.required"]  # execution.reconciliation_required


def outcome_message(
    contract: ExecutionContract, outcome: OperationOutcome, message_id: str
) -> OutcomeReported:
    return OutcomeReported(**_about(contract, message_id), outcome=outcome, reported_by="executor")


def reconciliation_message(
    contract: ExecutionContract, attempt_id: str, message_id: str
) -> ReconciliationRequired:
    return ReconciliationRequired(
        **_about(contract, message_id),
        organization_id=contract.organization_id,
        contract_version=contract.contract_version,
        attempt_id=attempt_id,
    )


def _about(contract: ExecutionContract, message_id: str) -> dict[str, Any]:
    """The fields every message about ``contract`` carries: caused by it, correlated with its
    proposal."""
    return {
        "message_id": message_id,
        "source": SOURCE,
        "correlation_id": contract.proposal_id,
        "causation_id": contract.message_id,
        "proposal_id": contract.proposal_id,
        "contract_id": contract.contract_id,
        "operation_kind": contract.operation_kind,
    }


async def conclude(
    conn: AsyncConnection,
    topology: Topology,
    contract: ExecutionContract,
    outcome: OperationOutcome,
    attempt: AttemptRef | None,
    *,
    direct: DirectPublisher | None = None,
) -> None:
    """Store the contract's outcome (``repository.done``) and enqueue what it causes — a
    ``ReconciliationRequired`` for an uncertain attempt, then the ``OutcomeReported`` — in ONE
    statement, the messages' ids stored with the outcome."""
    reconciliation = None
    if isinstance(outcome, NeedsReconciliation) and attempt is not None:
        reconciliation = reconciliation_message(contract, attempt.attempt_id, new_id("msg"))
    report = outcome_message(contract, outcome, new_id("msg"))
    change = repository.done(
        contract.contract_id,
        outcome,
        report.message_id,
        None if reconciliation is None else reconciliation.message_id,
    )
    messages = [_outgoing(topology, m) for m in (reconciliation, report) if m is not None]
    if direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX: no outbox row
        await hot.execute(conn, change.sql, *change.args)
        for out in messages:  # published after the commit
            direct.hold(out.message, exchange=out.exchange, routing_key=out.routing_key)
        return
    await enqueue_hot(conn, outbox, messages, change=change)


async def republish(
    conn: AsyncConnection, topology: Topology, contract: ExecutionContract, row: Execution
) -> None:
    """Send a finished contract's messages again under their own ids (a lost outcome is healed):
    reset their outbox rows, or write them anew."""
    assert row.outcome is not None and row.outcome_message_id is not None
    messages: list[Envelope] = [outcome_message(contract, row.outcome, row.outcome_message_id)]
    if row.reconciliation_message_id is not None and row.attempt is not None:
        messages.append(
            reconciliation_message(contract, row.attempt.attempt_id, row.reconciliation_message_id)
        )
    await enqueue_hot(conn, outbox, [_outgoing(topology, m) for m in messages], resend=True)


def _outgoing(topology: Topology, message: Envelope) -> Outgoing:
    key = RECONCILIATION_KEY if isinstance(message, ReconciliationRequired) else OUTCOME_KEY
    return Outgoing(message, topology.name("outcomes"), key)
