"""SQL for approval policies and approvals (SQLAlchemy Core on the caller's connection).

A policy change inserts the next version of the organization's policy for the kind (under a
transaction-level advisory lock on that pair, so two changes at once get consecutive versions);
nothing is ever updated or deleted (the migration's triggers refuse it), so the versions are
also the audit trail of who changed what, when.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from signoff_runtime import hot
from sqlalchemy import Row, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.lifecycle.repository import COLUMNS, AuditEntry, Stored, get
from signoff_proposals.policies.domain import Policy, Requirement
from signoff_proposals.tables import approval_policies, approvals, proposals


@dataclass(frozen=True, slots=True)
class Version:
    """One saved version of an organization's policy for an operation kind."""

    organization_id: str
    operation_kind: str
    version: int
    policy: Policy
    set_by: str
    set_at: datetime


def _version(row: Row[Any] | hot.Fields) -> Version:
    return Version(
        organization_id=row.organization_id,
        operation_kind=row.operation_kind,
        version=row.version,
        policy=Policy.model_validate(row.rules),
        set_by=row.set_by,
        set_at=row.set_at,
    )


#: ``in_force``: read for every proposal stored (its policy is frozen into it), so a hot statement
_IN_FORCE = (
    "SELECT organization_id, operation_kind, version, rules, set_by, set_at "
    "FROM proposals.approval_policies WHERE organization_id = $1 AND operation_kind = $2 "
    "ORDER BY version DESC LIMIT 1"
)


async def in_force(conn: AsyncConnection, organization_id: str, kind: str) -> Version | None:
    """The organization's newest policy for ``kind``, if it ever set one."""
    record = await hot.fetchrow(conn, _IN_FORCE, organization_id, kind)
    return None if record is None else _version(hot.Fields(record))


async def all_in_force(conn: AsyncConnection, organization_id: str) -> list[Version]:
    """The organization's newest version for each kind that has one, by kind."""
    newest = (
        select(
            approval_policies.c.operation_kind,
            func.max(approval_policies.c.version).label("version"),
        )
        .where(approval_policies.c.organization_id == organization_id)
        .group_by(approval_policies.c.operation_kind)
        .subquery()
    )
    stmt = (
        select(approval_policies)
        .join(
            newest,
            (newest.c.operation_kind == approval_policies.c.operation_kind)
            & (newest.c.version == approval_policies.c.version),
        )
        .where(approval_policies.c.organization_id == organization_id)
        .order_by(approval_policies.c.operation_kind)
    )
    return [_version(row) for row in (await conn.execute(stmt)).all()]


async def history(conn: AsyncConnection, organization_id: str, kind: str) -> list[Version]:
    stmt = (
        select(approval_policies)
        .where(
            approval_policies.c.organization_id == organization_id,
            approval_policies.c.operation_kind == kind,
        )
        .order_by(approval_policies.c.version)
    )
    return [_version(row) for row in (await conn.execute(stmt)).all()]


async def save(
    conn: AsyncConnection, organization_id: str, kind: str, policy: Policy, set_by: str
) -> Version:
    """Store ``policy`` as the next version (the caller has checked it)."""
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtext('approval_policy'), hashtext(:key))"),
        {"key": f"{organization_id}/{kind}"},
    )
    latest = select(func.coalesce(func.max(approval_policies.c.version), 0) + 1).where(
        approval_policies.c.organization_id == organization_id,
        approval_policies.c.operation_kind == kind,
    )
    stmt = (
        pg_insert(approval_policies)
        .values(
            organization_id=organization_id,
            operation_kind=kind,
            version=latest.scalar_subquery(),
            rules=policy.model_dump(mode="json"),
            set_by=set_by,
        )
        .returning(*approval_policies.c)
    )
    return _version((await conn.execute(stmt)).one())


async def freeze(conn: AsyncConnection, proposal_id: str, need: Requirement) -> Row[Any]:
    """Write ``need`` into a proposal just stored (the same transaction); the updated row."""
    stmt = (
        update(proposals)
        .where(proposals.c.id == proposal_id)
        .values(
            policy_version=need.policy_version,
            approvals_required=need.required,
            approver_roles=list(need.roles) if need.roles is not None else None,
            proposer_may_approve=need.proposer_may_approve,
        )
        .returning(*proposals.c)
    )
    return (await conn.execute(stmt)).one()


async def lock(conn: AsyncConnection, proposal_id: str) -> Stored:
    """The proposal with ``lapsed`` (past ``expires_at`` by the database clock), locked until
    the transaction ends: approvals of one proposal take their turns (``quorum``)."""
    row = await get(conn, proposal_id, lock=True)
    assert row is not None, "proposals are never deleted"
    return row


async def record(
    conn: AsyncConnection,
    proposal_id: str,
    approver: str,
    role: str,
    *,
    audited: AuditEntry | None = None,
) -> hot.Fields | None:
    """Record ``approver``'s approval, append it to the row's copy and write ``audited`` — one
    statement; ``None`` (nothing written) if they had already approved.

    The approval's INSERT is the statement's ``WITH`` part: the UPDATE of the copy and the audit
    row read what it inserted, so a repeated approval (the primary key's conflict) inserts
    nothing and nothing else is written either. Fixed SQL run by asyncpg
    (``signoff_runtime.hot``): every approval runs it."""
    if audited is None:
        record = await hot.fetchrow(conn, _RECORD, proposal_id, approver, role)
    else:
        record = await hot.fetchrow(
            conn,
            _RECORD_AUDITED,
            proposal_id,
            approver,
            role,
            audited.proposal_id,
            audited.actor,
            audited.action,
            hot.json_param(audited.detail),
        )
    return None if record is None else hot.Fields(record)


#: ``record``'s statement: the approval (``$1``-``$3``), the row's copy gaining its mark
_RECORDED = (
    "recorded AS (INSERT INTO proposals.approvals (proposal_id, approver, role) "
    "VALUES ($1, $2, $3) ON CONFLICT (proposal_id, approver) DO NOTHING "
    "RETURNING proposal_id, approved_at)"
)
_MARKED = (
    "UPDATE proposals.proposals AS p "
    "SET approvals = p.approvals || jsonb_build_array("
    "jsonb_build_object('user_id', $2::text, 'role', $3::text, "
    "'at', to_jsonb(recorded.approved_at))) "
    "FROM recorded WHERE p.id = recorded.proposal_id RETURNING " + COLUMNS
)
_RECORD = f"WITH {_RECORDED} {_MARKED}"
#: ``record`` with its audit row (``$4``-``$7``), written only if the approval was inserted
_RECORD_AUDITED = (
    f"WITH {_RECORDED}, audited AS (INSERT INTO proposals.audit "  # noqa: S608 - table's names
    "(proposal_id, actor, action, detail, at) "
    "SELECT $4::text, $5::text, $6::text, $7::jsonb, statement_timestamp() FROM recorded) "
    f"{_MARKED}"
)


async def approvers(conn: AsyncConnection, proposal_id: str) -> Sequence[str]:
    """Who has approved, oldest first: the recorded rows, not the row's copy."""
    stmt = (
        select(approvals.c.approver)
        .where(approvals.c.proposal_id == proposal_id)
        .order_by(approvals.c.approved_at, approvals.c.approver)
    )
    return list((await conn.scalars(stmt)).all())
