"""Reading and writing ``executor.executions``: the dedup row each contract's effect commits with.

Every function takes the caller's connection: the row is only meaningful inside the transaction
that also holds the domain change (local operations) or the attempt record (external ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from asyncpg import Record
from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import OperationOutcome, outcome_adapter
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import hot
from signoff_runtime.outbox import Change
from sqlalchemy.ext.asyncio import AsyncConnection

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

# Every contract runs these: fixed SQL, prepared by asyncpg (``signoff_runtime.hot``).
_CLAIM = (
    f"INSERT INTO executor.executions ({_INSERTED}) "  # noqa: S608 - constant columns
    "VALUES ($1, $2, $3, $4, $5, $6, 'started') "
    "ON CONFLICT (contract_id) DO UPDATE SET contract_id = EXCLUDED.contract_id "
    f"RETURNING {_COLUMNS}, now() > $7 AS late"
)
_READ = f"SELECT {_COLUMNS}, false AS late FROM executor.executions WHERE contract_id = $1"  # noqa: S608
_LOCK = _READ + " FOR UPDATE"
_ATTEMPTING = (
    "UPDATE executor.executions SET status = 'attempting', attempt_id = $2, "
    "idempotency_key = $3, updated_at = now() WHERE contract_id = $1"
)
_DONE = (
    "UPDATE executor.executions SET status = 'done', outcome = $2::jsonb, "
    "outcome_message_id = $3, reconciliation_message_id = $4, updated_at = now() "
    "WHERE contract_id = $1"
)


def _execution(row: Record) -> Execution:
    attempt = (
        AttemptRef(attempt_id=row["attempt_id"], idempotency_key=row["idempotency_key"])
        if row["attempt_id"] is not None
        else None
    )
    stored = row["outcome"]  # jsonb, decoded by the connection's codec
    return Execution(
        contract_id=row["contract_id"],
        proposal_id=row["proposal_id"],
        status=row["status"],
        attempt=attempt,
        outcome=outcome_adapter.validate_python(stored) if stored is not None else None,
        outcome_message_id=row["outcome_message_id"],
        reconciliation_message_id=row["reconciliation_message_id"],
        late=bool(row["late"]),
    )


async def claim(conn: AsyncConnection, contract: ExecutionContract) -> Execution:
    """The contract's row, locked for this transaction; inserted as ``started`` if new.

    One round trip: the conflicting insert becomes a no-op update, which locks the existing row
    and returns it as the last committed transaction left it. The insert blocks while another
    transaction holds an uncommitted insert of the same key, and the update while another holds
    the row: two executors racing on one contract take turns, and the second sees what the first
    committed. ``late`` compares ``execute_by`` with the database clock in the same statement.
    """
    row = await hot.fetchrow(
        conn,
        _CLAIM,
        contract.contract_id,
        contract.proposal_id,
        contract.organization_id,
        contract.operation_kind,
        contract.contract_version,
        contract.message_id,
        contract.execute_by,
    )
    assert row is not None, "an upsert returns its row"
    return _execution(row)


async def lock(conn: AsyncConnection, contract_id: str) -> Execution | None:
    return await read(conn, contract_id, for_update=True)


async def read(
    conn: AsyncConnection, contract_id: str, *, for_update: bool = False
) -> Execution | None:
    row = await hot.fetchrow(conn, _LOCK if for_update else _READ, contract_id)
    return _execution(row) if row is not None else None


async def mark_attempting(conn: AsyncConnection, contract_id: str, attempt: AttemptRef) -> None:
    await hot.execute(conn, _ATTEMPTING, contract_id, attempt.attempt_id, attempt.idempotency_key)


def done(
    contract_id: str,
    outcome: OperationOutcome,
    outcome_message_id: str,
    reconciliation_message_id: str | None = None,
) -> Change:
    """The statement that stores a contract's outcome (``outbox.conclude`` writes it together
    with the outcome's messages)."""
    return Change(
        _DONE,
        (
            contract_id,
            hot.json_param(outcome.model_dump(mode="json")),
            outcome_message_id,
            reconciliation_message_id,
        ),
    )
