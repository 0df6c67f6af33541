"""The messages a concluded contract causes, written to the executor's outbox.

``OutcomeReported`` and ``ReconciliationRequired`` are only ever written here, in the transaction
that stores the outcome, and published by the relay — never returned from a handler, so a commit
cannot happen without its message nor a message without its commit.

Their message ids are stored with the outcome: a repeated delivery of a finished contract
re-publishes the *same* message (``republish``), which heals an outcome lost downstream without
ever giving the proposals service two different answers.
"""

from __future__ import annotations

import json

from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.v1 import (
    Envelope,
    ExecutionContract,
    OutcomeReported,
    ReconciliationRequired,
)
from signoff_runtime import tracing
from signoff_runtime.outbox import enqueue, notify_channel
from signoff_runtime.topology import ROUTING_KEYS, Topology
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_executor import repository
from signoff_executor.tables import outbox

SOURCE = "executor"
OUTCOME_KEY = ROUTING_KEYS["proposals.outcomes"]  # execution.outcome
RECONCILIATION_KEY = ROUTING_KEYS["reconciler.required"]  # execution.reconciliation_required


def outcome_message(
    contract: ExecutionContract, outcome: OperationOutcome, message_id: str
) -> OutcomeReported:
    return OutcomeReported(
        message_id=message_id,
        source=SOURCE,
        correlation_id=contract.proposal_id,
        causation_id=contract.message_id,
        proposal_id=contract.proposal_id,
        contract_id=contract.contract_id,
        operation_kind=contract.operation_kind,
        outcome=outcome,
        reported_by="executor",
    )


def reconciliation_message(
    contract: ExecutionContract, attempt_id: str, message_id: str
) -> ReconciliationRequired:
    return ReconciliationRequired(
        message_id=message_id,
        source=SOURCE,
        correlation_id=contract.proposal_id,
        causation_id=contract.message_id,
        proposal_id=contract.proposal_id,
        contract_id=contract.contract_id,
        organization_id=contract.organization_id,
        operation_kind=contract.operation_kind,
        contract_version=contract.contract_version,
        attempt_id=attempt_id,
    )


async def add(
    conn: AsyncConnection,
    topology: Topology,
    message: Envelope,
    *,
    direct: DirectPublisher | None = None,
) -> None:
    if direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX: published after the commit
        direct.hold(message, exchange=topology.name("outcomes"), routing_key=_key(message))
        return
    await enqueue(
        conn, outbox, message, exchange=topology.name("outcomes"), routing_key=_key(message)
    )


async def conclude(
    conn: AsyncConnection,
    topology: Topology,
    contract_id: str,
    outcome: OperationOutcome,
    message: OutcomeReported,
    reconciliation_message_id: str | None,
    *,
    direct: DirectPublisher | None = None,
) -> None:
    """``repository.mark_done`` and ``add`` of the outcome report, in one statement."""
    if direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX: no outbox row
        await repository.mark_done(
            conn, contract_id, outcome, message.message_id, reconciliation_message_id
        )
        await add(conn, topology, message, direct=direct)
        return
    await conn.execute(
        text(
            f"WITH done AS ({repository.MARK_DONE}), "  # noqa: S608 - constant
            "ins AS (INSERT INTO executor.outbox "
            "(message_id, exchange, routing_key, message_type, correlation_id, body, headers) "
            "VALUES (:omid, :ex, :rk, :mt, :corr, :body, CAST(:headers AS jsonb)) "
            "ON CONFLICT (message_id) DO NOTHING RETURNING 1) "
            "SELECT pg_notify(:channel, '') FROM ins"
        ),
        {
            **repository.done_params(
                contract_id, outcome, message.message_id, reconciliation_message_id
            ),
            "ex": topology.name("outcomes"),
            "rk": OUTCOME_KEY,
            "mt": message.type,
            "corr": message.correlation_id,
            "body": message.model_dump_json().encode(),
            "headers": json.dumps(tracing.headers()),
            "channel": notify_channel(outbox),
        },
    )


async def republish(conn: AsyncConnection, topology: Topology, message: Envelope) -> None:
    """Publish ``message`` again under its own id: reset its outbox row, or write it anew."""
    await conn.execute(
        text(
            "WITH up AS (INSERT INTO executor.outbox "
            "(message_id, exchange, routing_key, message_type, correlation_id, body, headers) "
            "VALUES (:mid, :ex, :rk, :mt, :cid, :body, CAST(:headers AS jsonb)) "
            "ON CONFLICT (message_id) DO UPDATE SET sent_at = NULL, available_at = now() "
            "RETURNING 1) SELECT pg_notify(:channel, '') FROM up"
        ),
        {
            "mid": message.message_id,
            "ex": topology.name("outcomes"),
            "rk": _key(message),
            "mt": message.type,
            "cid": message.correlation_id,
            "body": message.model_dump_json().encode(),
            "headers": json.dumps({}),
            "channel": notify_channel(outbox),
        },
    )


def _key(message: Envelope) -> str:
    return RECONCILIATION_KEY if isinstance(message, ReconciliationRequired) else OUTCOME_KEY
