"""Reading and writing ``reconciler.checks``.

Every write after the lease is conditional on ``status = 'open' AND lease_owner = :owner``: a
reconciler whose commit failed in doubt, or whose lease ran out, cannot overwrite a check someone
else resolved — the conditional update simply matches nothing. An operator's resolution is
conditional on the check not being resolved, and holds the row lock while it runs.

Every statement on ``reconciler.checks`` is here — the loop's, the request consumer's and the
operators' — so that the conditions that keep them from overwriting each other read side by
side; that is why this module is a little over 300 lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from signoff_contracts.operations import StrandedAttempt
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.v1 import ReconciliationRequired
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


@dataclass(frozen=True, slots=True)
class Check:
    id: int
    attempt_id: str
    proposal_id: str
    contract_id: str | None
    operation_kind: str
    contract_version: int
    required_message_id: str | None
    checks: int
    #: seconds since the check opened, by the database clock
    age_s: float = 0.0
    #: past the escalation bound already (operators were alerted once)
    escalated: bool = False


_COLUMNS = (
    "id, attempt_id, proposal_id, contract_id, operation_kind, contract_version, "
    "required_message_id, checks, extract(epoch FROM now() - created_at)::float8 AS age_s, "
    "escalated_at IS NOT NULL AS escalated"
)


def _check(row: Any) -> Check:
    return Check(**row._mapping)


async def record(conn: AsyncConnection, message: ReconciliationRequired) -> bool:
    """Open a check for the message's attempt; ``False`` if one exists already."""
    row = await conn.execute(
        text(
            "INSERT INTO reconciler.checks (attempt_id, proposal_id, contract_id, "
            "organization_id, operation_kind, contract_version, required_message_id) "
            "VALUES (:aid, :pid, :cid, :org, :kind, :ver, :mid) "
            "ON CONFLICT (attempt_id) DO NOTHING RETURNING 1"
        ),
        {
            "aid": message.attempt_id,
            "pid": message.proposal_id,
            "cid": message.contract_id,
            "org": message.organization_id,
            "kind": message.operation_kind,
            "ver": message.contract_version,
            "mid": message.message_id,
        },
    )
    return row.first() is not None


async def fill_contract(conn: AsyncConnection, message: ReconciliationRequired) -> Any:
    """Name the contract of a check the scan opened without one; the row (with ``status`` and
    ``outcome``) if this filled it in, else ``None``."""
    return (
        await conn.execute(
            text(
                "UPDATE reconciler.checks SET contract_id = :cid, "  # noqa: S608 - constant columns
                "required_message_id = :mid "
                "WHERE attempt_id = :aid AND contract_id IS NULL "
                f"RETURNING {_COLUMNS}, status, outcome"
            ),
            {"aid": message.attempt_id, "cid": message.contract_id, "mid": message.message_id},
        )
    ).first()


async def open_stranded(
    conn: AsyncConnection, kind: str, version: int, attempt: StrandedAttempt
) -> bool:
    """Open a check for an attempt the scan found; ``False`` if it has one already."""
    row = await conn.execute(
        text(
            "INSERT INTO reconciler.checks (attempt_id, proposal_id, contract_id, "
            "organization_id, operation_kind, contract_version, found_by) "
            "VALUES (:aid, :pid, :cid, :org, :kind, :ver, 'scan') "
            "ON CONFLICT (attempt_id) DO NOTHING RETURNING 1"
        ),
        {
            "aid": attempt.attempt_id,
            "pid": attempt.proposal_id,
            "cid": attempt.contract_id,
            "org": attempt.organization_id,
            "kind": kind,
            "ver": version,
        },
    )
    return row.first() is not None


async def lease_due(conn: AsyncConnection, owner: str, batch: int, lease_s: float) -> list[Check]:
    """Lease up to ``batch`` due open checks (skipping any another reconciler holds)."""
    rows = await conn.execute(
        text(
            f"UPDATE reconciler.checks SET lease_owner = :owner, "  # noqa: S608 - constant columns
            "lease_until = now() + make_interval(secs => :lease) "
            "WHERE id IN (SELECT id FROM reconciler.checks WHERE status = 'open' "
            "AND next_check_at <= now() AND (lease_until IS NULL OR lease_until < now()) "
            "ORDER BY next_check_at LIMIT :batch FOR UPDATE SKIP LOCKED) "
            f"RETURNING {_COLUMNS}"
        ),
        {"owner": owner, "lease": lease_s, "batch": batch},
    )
    return [_check(row) for row in rows]


async def lock_leased(conn: AsyncConnection, check_id: int, owner: str) -> Check | None:
    row = (
        await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM reconciler.checks "  # noqa: S608 - constant columns
                "WHERE id = :id AND status = 'open' AND lease_owner = :owner FOR UPDATE"
            ),
            {"id": check_id, "owner": owner},
        )
    ).first()
    return _check(row) if row is not None else None


async def resolve(
    conn: AsyncConnection,
    check_id: int,
    owner: str,
    outcome: OperationOutcome,
    message_id: str | None,
) -> None:
    """Conclude a leased check with the authoritative outcome."""
    await conn.execute(
        text(
            "UPDATE reconciler.checks SET status = 'resolved', checks = checks + 1, "
            "last_checked_at = now(), resolved_at = now(), outcome = CAST(:outcome AS jsonb), "
            "last_result = CAST(:result AS jsonb), outcome_message_id = :mid, "
            "resolved_by = 'reconciler', lease_owner = NULL, lease_until = NULL "
            "WHERE id = :id AND status = 'open' AND lease_owner = :owner"
        ),
        {
            "id": check_id,
            "owner": owner,
            "outcome": json.dumps(outcome.model_dump(mode="json")),
            "result": json.dumps({"result": "resolved", "outcome": outcome.type}),
            "mid": message_id,
        },
    )


async def reschedule(
    conn: AsyncConnection,
    check_id: int,
    owner: str,
    delay_s: float,
    result: dict[str, Any],
    *,
    escalate: bool = False,
) -> datetime | None:
    """Count an inconclusive check and set the next one (marking it escalated, the first time
    it is past the bound, when ``escalate``); the new ``next_check_at``."""
    return (
        await conn.execute(
            text(
                "UPDATE reconciler.checks SET checks = checks + 1, last_checked_at = now(), "
                "next_check_at = now() + make_interval(secs => :delay), "
                "last_result = CAST(:result AS jsonb), lease_owner = NULL, lease_until = NULL, "
                "escalated_at = CASE WHEN :escalate THEN coalesce(escalated_at, now()) "
                "ELSE escalated_at END "
                "WHERE id = :id AND status = 'open' AND lease_owner = :owner "
                "RETURNING next_check_at"
            ),
            {
                "id": check_id,
                "owner": owner,
                "delay": delay_s,
                "result": json.dumps(result),
                "escalate": escalate,
            },
        )
    ).scalar_one_or_none()


async def set_outcome_message(conn: AsyncConnection, check_id: int, message_id: str) -> None:
    await conn.execute(
        text("UPDATE reconciler.checks SET outcome_message_id = :mid WHERE id = :id"),
        {"id": check_id, "mid": message_id},
    )


async def open_summary(conn: AsyncConnection) -> tuple[int, float, int]:
    """How many checks are open, the age in seconds of the oldest (0 when none), and how many
    of the open ones are escalated."""
    row = (
        await conn.execute(
            text(
                "SELECT count(*), "
                "coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8, "
                "count(escalated_at) FROM reconciler.checks WHERE status = 'open'"
            )
        )
    ).one()
    return int(row[0]), float(row[1]), int(row[2])


# --- what operators see and do (``operators``) ------------------------------------------------

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


async def make_due(conn: AsyncConnection, proposal_id: str) -> None:
    await conn.execute(
        text(
            "UPDATE reconciler.checks SET next_check_at = now() "
            "WHERE proposal_id = :p AND status = 'open'"
        ),
        {"p": proposal_id},
    )


async def resolve_by_operator(
    conn: AsyncConnection,
    check_id: int,
    outcome: OperationOutcome,
    message_id: str | None,
    *,
    verdict: str,
    operator: str,
    note: str,
) -> None:
    await conn.execute(
        text(
            "UPDATE reconciler.checks SET status = 'resolved', checks = checks + 1, "
            "last_checked_at = now(), resolved_at = now(), "
            "outcome = CAST(:outcome AS jsonb), outcome_message_id = :mid, "
            "last_result = CAST(:result AS jsonb), resolved_by = 'operator', "
            "operator = :operator, note = :note, lease_owner = NULL, lease_until = NULL "
            "WHERE id = :id AND status IN ('open', 'gave_up')"
        ),
        {
            "id": check_id,
            "outcome": json.dumps(outcome.model_dump(mode="json")),
            "mid": message_id,
            "result": json.dumps({"result": "manual", "verdict": verdict}),
            "operator": operator,
            "note": note,
        },
    )
