"""Reading and writing ``executor.executions``: the dedup row each contract's effect commits with.

Every function takes the caller's connection: the row is only meaningful inside the transaction
that also holds the domain change (local operations) or the attempt record (external ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import OperationOutcome, outcome_adapter
from signoff_contracts.v1 import ExecutionContract
from sqlalchemy import Update, func, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_executor.tables import executions

Status = Literal["started", "attempting", "done"]


@dataclass(frozen=True, slots=True)
class Execution:
    contract_id: str
    proposal_id: str
    status: Status
    attempt: AttemptRef | None
    outcome: OperationOutcome | None
    outcome_message_id: str | None
    reconciliation_message_id: str | None
    #: the database clock is past the contract's ``execute_by`` (set by ``claim`` only)
    late: bool = False


_COLUMNS = (
    "contract_id, proposal_id, status, attempt_id, idempotency_key, outcome, "
    "outcome_message_id, reconciliation_message_id"
)

_INSERTED = (
    "contract_id, proposal_id, organization_id, operation_kind, contract_version, "
    "contract_message_id, status"
)


def _execution(row: Any) -> Execution:
    attempt = (
        AttemptRef(attempt_id=row.attempt_id, idempotency_key=row.idempotency_key)
        if row.attempt_id is not None
        else None
    )
    outcome = outcome_adapter.validate_python(row.outcome) if row.outcome is not None else None
    return Execution(
        contract_id=row.contract_id,
        proposal_id=row.proposal_id,
        status=row.status,
        attempt=attempt,
        outcome=outcome,
        outcome_message_id=row.outcome_message_id,
        reconciliation_message_id=row.reconciliation_message_id,
        late=bool(getattr(row, "late", False)),
    )


async def claim(conn: AsyncConnection, contract: ExecutionContract) -> Execution:
    """The contract's row, locked for this transaction; inserted as ``started`` if new.

    One round trip: the conflicting insert becomes a no-op update, which locks the existing row
    and returns it as the last committed transaction left it. The insert blocks while another
    transaction holds an uncommitted insert of the same key, and the update while another holds
    the row: two executors racing on one contract take turns, and the second sees what the first
    committed. ``late`` compares ``execute_by`` with the database clock in the same statement.
    """
    row = (
        await conn.execute(
            text(
                f"INSERT INTO executor.executions ({_INSERTED}) "  # noqa: S608 - constant columns
                "VALUES (:cid, :pid, :org, :kind, :ver, :mid, 'started') "
                "ON CONFLICT (contract_id) DO UPDATE SET contract_id = EXCLUDED.contract_id "
                f"RETURNING {_COLUMNS}, now() > :by AS late"
            ),
            {
                "cid": contract.contract_id,
                "pid": contract.proposal_id,
                "org": contract.organization_id,
                "kind": contract.operation_kind,
                "ver": contract.contract_version,
                "mid": contract.message_id,
                "by": contract.execute_by,
            },
        )
    ).one()
    return _execution(row)


async def lock(conn: AsyncConnection, contract_id: str) -> Execution | None:
    return await read(conn, contract_id, for_update=True)


async def read(
    conn: AsyncConnection, contract_id: str, *, for_update: bool = False
) -> Execution | None:
    row = (
        await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM executor.executions "  # noqa: S608 - constant columns
                "WHERE contract_id = :cid" + (" FOR UPDATE" if for_update else "")
            ),
            {"cid": contract_id},
        )
    ).first()
    return _execution(row) if row is not None else None


async def mark_attempting(conn: AsyncConnection, contract_id: str, attempt: AttemptRef) -> None:
    await conn.execute(
        text(
            "UPDATE executor.executions SET status = 'attempting', attempt_id = :aid, "
            "idempotency_key = :key, updated_at = now() WHERE contract_id = :cid"
        ),
        {"cid": contract_id, "aid": attempt.attempt_id, "key": attempt.idempotency_key},
    )


def done(
    contract_id: str,
    outcome: OperationOutcome,
    outcome_message_id: str,
    reconciliation_message_id: str | None = None,
) -> Update:
    """The statement that stores a contract's outcome (``outbox.conclude`` writes it together
    with the outcome's messages)."""
    return (
        update(executions)
        .where(executions.c.contract_id == contract_id)
        .values(
            status="done",
            outcome=outcome.model_dump(mode="json"),
            outcome_message_id=outcome_message_id,
            reconciliation_message_id=reconciliation_message_id,
            updated_at=func.now(),
        )
    )
