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

from sqlalchemy import CTE, Row, func, insert, literal, select, text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.lifecycle.repository import DB_CLOCK, AuditEntry, get
from signoff_proposals.policies.domain import Policy, Requirement
from signoff_proposals.tables import approval_policies, approvals, audit, proposals


@dataclass(frozen=True, slots=True)
class Version:
    """One saved version of an organization's policy for an operation kind."""

    organization_id: str
    operation_kind: str
    version: int
    policy: Policy
    set_by: str
    set_at: datetime


def _version(row: Row[Any]) -> Version:
    return Version(
        organization_id=row.organization_id,
        operation_kind=row.operation_kind,
        version=row.version,
        policy=Policy.model_validate(row.rules),
        set_by=row.set_by,
        set_at=row.set_at,
    )


async def in_force(conn: AsyncConnection, organization_id: str, kind: str) -> Version | None:
    stmt = (
        select(approval_policies)
        .where(
            approval_policies.c.organization_id == organization_id,
            approval_policies.c.operation_kind == kind,
        )
        .order_by(approval_policies.c.version.desc())
        .limit(1)
    )
    row = (await conn.execute(stmt)).first()
    return None if row is None else _version(row)


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


async def lock(conn: AsyncConnection, proposal_id: str) -> Row[Any]:
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
) -> Row[Any] | None:
    """Record ``approver``'s approval, append it to the row's copy and write ``audited`` — one
    statement; ``None`` (nothing written) if they had already approved.

    The approval's INSERT is the statement's ``WITH`` part: the UPDATE of the copy and the audit
    row read what it inserted, so a repeated approval (the primary key's conflict) inserts
    nothing and nothing else is written either."""
    inserted = (
        pg_insert(approvals)
        .values(proposal_id=proposal_id, approver=approver, role=role)
        .on_conflict_do_nothing(index_elements=["proposal_id", "approver"])
        .returning(approvals.c.proposal_id, approvals.c.approved_at)
        .cte("recorded")
    )
    mark = func.jsonb_build_array(
        func.jsonb_build_object(
            "user_id", approver, "role", role, "at", func.to_jsonb(inserted.c.approved_at)
        )
    )
    stmt = (
        update(proposals)
        .where(proposals.c.id == inserted.c.proposal_id)
        .values(approvals=proposals.c.approvals.op("||")(mark))
        .returning(*proposals.c)
    )
    if audited is not None:
        stmt = stmt.add_cte(_audit_after(inserted, audited))
    return (await conn.execute(stmt)).first()


def _audit_after(inserted: CTE, entry: AuditEntry) -> CTE:
    """``entry``'s audit row, written only if ``inserted`` inserted a row."""
    values = select(
        literal(entry.proposal_id),
        literal(entry.actor),
        literal(entry.action),
        literal(entry.detail, JSONB),
        DB_CLOCK,
    ).select_from(inserted)
    columns = ["proposal_id", "actor", "action", "detail", "at"]
    return insert(audit).from_select(columns, values).cte("audited")


async def approvers(conn: AsyncConnection, proposal_id: str) -> Sequence[str]:
    """Who has approved, oldest first: the recorded rows, not the row's copy."""
    stmt = (
        select(approvals.c.approver)
        .where(approvals.c.proposal_id == proposal_id)
        .order_by(approvals.c.approved_at, approvals.c.approver)
    )
    return list((await conn.scalars(stmt)).all())
