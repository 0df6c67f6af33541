"""SQL for proposals and their audit trail (SQLAlchemy Core on the caller's connection).

Every status change goes through ``transition``: ONE conditional ``UPDATE … WHERE id = :id AND
status IN (:expected) [AND expires_at > statement_timestamp()] RETURNING *``. Under READ
COMMITTED PostgreSQL re-checks that WHERE clause on the newest row version, so of any number of
concurrent callers exactly one matches; the others get ``None`` and re-read.

Expiry compares with ``statement_timestamp()``, not ``now()``: ``now()`` is the start of the
*transaction*, which in an approval began a few milliseconds earlier with the membership lookup —
long enough to claim a proposal just after it expired.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, cast

from signoff_contracts.outcomes import outcome_adapter
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import AuditEntry, ProposalView
from sqlalchemy import DateTime, Row, Table, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_proposals.lifecycle import metrics as lifecycle_metrics
from signoff_proposals.metrics import TRANSITIONS
from signoff_proposals.tables import audit, proposals

#: the database clock at this statement (see the module docstring)
DB_CLOCK = func.statement_timestamp(type_=DateTime(timezone=True))


@dataclass
class Tx:
    """One transaction, and the metrics to count once it has committed."""

    conn: AsyncConnection
    counted: list[tuple[str, str]] = field(default_factory=list)
    timed: list[tuple[Any, dict[str, str], float]] = field(default_factory=list)
    #: publishes to make once committed; only ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX`` adds any
    deferred: list[Callable[[], Awaitable[None]]] | None = None

    def count(self, kind: str, status: ProposalStatus) -> None:
        self.counted.append((kind, status.value))

    def defer(self, publish: Callable[[], Awaitable[None]]) -> None:
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(publish)


@asynccontextmanager
async def unit_of_work(engine: AsyncEngine) -> AsyncIterator[Tx]:
    async with engine.begin() as conn:
        tx = Tx(conn)
        yield tx
    for kind, status in tx.counted:
        TRANSITIONS.labels(kind=kind, status=status).inc()
    for histogram, labels, seconds in tx.timed:
        histogram.labels(**labels).observe(seconds)
    for publish in tx.deferred or ():
        await publish()


@dataclass(frozen=True, slots=True)
class NewProposal:
    """A proposal to store: the contract this service resolved, and whom it is for."""

    proposal_id: str
    organization_id: str
    requested_by: str
    conversation_id: str | None
    section: str
    resource_id: str
    operation_kind: str
    contract_version: int
    request: dict[str, Any]
    arguments: dict[str, Any]
    preview: dict[str, Any]


async def insert_proposal(tx: Tx, msg: NewProposal, ttl: timedelta) -> Row[Any] | None:
    """Store ``msg`` as pending; ``None`` if a proposal with its id exists (a duplicate)."""
    stmt = (
        pg_insert(proposals)
        .values(
            id=msg.proposal_id,
            organization_id=msg.organization_id,
            requested_by=msg.requested_by,
            conversation_id=msg.conversation_id,
            section=msg.section,
            resource_id=msg.resource_id,
            operation_kind=msg.operation_kind,
            contract_version=msg.contract_version,
            request=msg.request,
            arguments=msg.arguments,
            preview=msg.preview,
            status=ProposalStatus.PENDING.value,
            expires_at=func.now() + ttl,
        )
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(*proposals.c)
    )
    row = (await tx.conn.execute(stmt)).first()
    if row is not None:
        tx.count(msg.operation_kind, ProposalStatus.PENDING)
    return row


async def get(conn: AsyncConnection, proposal_id: str) -> Row[Any] | None:
    """The proposal, with ``lapsed``: is it past ``expires_at`` by the database clock now?"""
    stmt = select(*proposals.c, (proposals.c.expires_at <= DB_CLOCK).label("lapsed")).where(
        proposals.c.id == proposal_id
    )
    return cast("Row[Any] | None", (await conn.execute(stmt)).first())


async def lock(conn: AsyncConnection, proposal_id: str) -> Row[Any] | None:
    """The proposal, locked until the end of the transaction (outcomes read-then-move)."""
    stmt = select(*proposals.c).where(proposals.c.id == proposal_id).with_for_update()
    return (await conn.execute(stmt)).first()


async def lock_delivered(
    conn: AsyncConnection, message_id: str, proposal_id: str
) -> tuple[bool, Row[Any] | None]:
    """``first_delivery`` of ``message_id`` and ``lock`` of the proposal in one statement:
    whether this is the message's first delivery, and the locked row (``None``: no such id)."""
    row = (
        await conn.execute(
            text(
                "WITH ins AS (INSERT INTO proposals.inbox (message_id) VALUES (:mid) "
                "ON CONFLICT DO NOTHING RETURNING 1) "
                "SELECT p.*, EXISTS (SELECT 1 FROM ins) AS first_delivery "
                "FROM proposals.proposals p WHERE p.id = :pid FOR UPDATE OF p"
            ),
            {"mid": message_id, "pid": proposal_id},
        )
    ).first()
    return (bool(row.first_delivery), row) if row is not None else (True, None)


async def transition(
    tx: Tx,
    proposal_id: str,
    *,
    expected: Collection[ProposalStatus],
    to: ProposalStatus,
    unexpired: bool = False,
    lapsed: bool = False,
    organization_id: str | None = None,
    values: dict[str, Any] | None = None,
) -> Row[Any] | None:
    """The one conditional UPDATE of a status change; ``None`` if the row did not qualify."""
    stmt = (
        update(proposals)
        .where(proposals.c.id == proposal_id, proposals.c.status.in_([s.value for s in expected]))
        .values(status=to.value, **(values or {}))
        .returning(*proposals.c)
    )
    if unexpired:
        stmt = stmt.where(proposals.c.expires_at > DB_CLOCK)
    if lapsed:
        stmt = stmt.where(proposals.c.expires_at <= DB_CLOCK)
    if organization_id is not None:
        stmt = stmt.where(proposals.c.organization_id == organization_id)
    row = (await tx.conn.execute(stmt)).first()
    if row is not None:
        tx.count(row.operation_kind, to)
        observed = lifecycle_metrics.latency(row, to)
        if observed is not None:
            tx.timed.append(observed)
    return row


async def expire_due(tx: Tx, batch: int) -> Sequence[Row[Any]]:
    """Mark up to ``batch`` lapsed pending proposals expired (skipping rows others hold)."""
    rows = (
        await tx.conn.execute(
            text(
                "WITH due AS (SELECT id FROM proposals.proposals WHERE status = 'pending' "
                "AND expires_at <= statement_timestamp() ORDER BY expires_at LIMIT :n "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE proposals.proposals p SET status = 'expired' FROM due "
                "WHERE p.id = due.id AND p.status = 'pending' RETURNING p.*"
            ),
            {"n": batch},
        )
    ).all()
    for row in rows:
        tx.count(row.operation_kind, ProposalStatus.EXPIRED)
    return rows


async def take_stuck(
    tx: Tx, batch: int, after_s: float, max_backoff_s: float
) -> Sequence[Row[Any]]:
    """Executing proposals quiet past their bound whose last contract copy has been sent.

    Each taken row's next look is pushed out ``after_s * 2^count`` (capped): a per-row back-off,
    so an executor that is down for an hour gets a handful of copies, not thousands.
    """
    return (
        await tx.conn.execute(
            text(
                "WITH due AS (SELECT p.id FROM proposals.proposals p "
                "WHERE p.status = 'executing' AND p.republish_after <= statement_timestamp() "
                "AND NOT EXISTS (SELECT 1 FROM proposals.outbox o WHERE o.sent_at IS NULL "
                "AND o.correlation_id = p.id AND o.message_type = 'execution.contract') "
                "ORDER BY p.republish_after LIMIT :n FOR UPDATE OF p SKIP LOCKED) "
                "UPDATE proposals.proposals p SET republish_count = p.republish_count + 1, "
                "republish_after = statement_timestamp() + make_interval(secs => "
                "least(:cap, :after * 2 ^ (p.republish_count + 1))) "
                "FROM due WHERE p.id = due.id AND p.status = 'executing' RETURNING p.*"
            ),
            {"n": batch, "after": after_s, "cap": max_backoff_s},
        )
    ).all()


async def write_audit(
    tx: Tx,
    proposal_id: str,
    *,
    actor: str,
    action: str,
    from_status: ProposalStatus | str | None = None,
    to_status: ProposalStatus | str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    await tx.conn.execute(
        insert(audit).values(
            proposal_id=proposal_id,
            at=DB_CLOCK,
            actor=actor,
            action=action,
            from_status=None if from_status is None else str(from_status),
            to_status=None if to_status is None else str(to_status),
            detail=detail or {},
        )
    )


async def list_for_org(
    conn: AsyncConnection,
    organization_id: str,
    *,
    status: StrEnum | None,
    limit: int,
    before_id: str | None,
    table: Table = proposals,
) -> Sequence[Row[Any]]:
    """An organization's rows of ``table`` (proposals, or pause points), newest first,
    keyset-paged by id (ids sort by creation time)."""
    stmt = (
        select(*table.c)
        .where(table.c.organization_id == organization_id)
        .order_by(table.c.id.desc())
        .limit(limit)
    )
    if status is not None:
        stmt = stmt.where(table.c.status == status.value)
    if before_id is not None:
        stmt = stmt.where(table.c.id < before_id)
    return (await conn.execute(stmt)).all()


async def audit_trail(conn: AsyncConnection, proposal_id: str) -> list[AuditEntry]:
    rows = (
        await conn.execute(
            select(audit).where(audit.c.proposal_id == proposal_id).order_by(audit.c.id)
        )
    ).all()
    return [
        AuditEntry(
            at=r.at,
            actor=r.actor,
            action=r.action,
            from_status=r.from_status,
            to_status=r.to_status,
            detail=r.detail,
        )
        for r in rows
    ]


def view(row: Row[Any]) -> ProposalView:
    """How clients see a stored proposal: the preview, never the arguments."""
    return ProposalView(
        id=row.id,
        organization_id=row.organization_id,
        requested_by=row.requested_by,
        conversation_id=row.conversation_id,
        section=row.section,
        resource_id=row.resource_id,
        operation_kind=row.operation_kind,
        contract_version=row.contract_version,
        preview=row.preview,
        status=ProposalStatus(row.status),
        created_at=row.created_at,
        expires_at=row.expires_at,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        decline_reason=row.decline_reason,
        superseded_by=row.superseded_by,
        outcome=None if row.outcome is None else outcome_adapter.validate_python(row.outcome),
        request=getattr(row, "request", None),
    )
