"""Test support for the club's operations, shared by its own tests and the conformance kit.

``refund_world`` / ``broadcast_world`` seed one organization with a case to act on, plus a
second organization whose ids must never resolve in the first one's scope; rows are committed
(operations then run on connections of their own, concurrently at times), and every call makes
fresh organizations, so tests never share state. ``drive_external`` runs the attempt protocol
through the executor's own copy of it (``signoff_runtime.execution``), so an operation's tests
exercise the same transaction boundaries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    ExecutionContext,
    ExternalOperation,
    Scope,
)
from signoff_contracts.outcomes import OperationOutcome
from signoff_runtime import execution
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_club import tables as t
from signoff_club.operations.apply_broadcast_draft import ApplyBroadcastDraft
from signoff_club.operations.refund_missing_discount import RefundMissingDiscount
from signoff_club.seed import seed_organization
from signoff_club.settings import ClubSettings

OperationT = TypeVar("OperationT", bound=AnyOperation)
R = TypeVar("R")


@dataclass(frozen=True)
class OperationWorld(Generic[OperationT]):
    """An operation, a scope in a fresh organization, a request that resolves there, and a
    request naming the other organization's ids (which must not)."""

    operation: OperationT
    scope: Scope
    request: dict[str, Any]
    foreign_request: dict[str, Any]
    organization: dict[str, Any]
    other_organization: dict[str, Any]
    other_scope: Scope
    extras: dict[str, Any] = field(default_factory=dict)


RefundWorld = OperationWorld[RefundMissingDiscount]
BroadcastWorld = OperationWorld[ApplyBroadcastDraft]


def execution_context(proposal_id: str | None = None) -> ExecutionContext:
    return ExecutionContext(
        proposal_id=proposal_id or new_id("prp"),
        contract_id=new_id("ctr"),
        approved_by=new_id("usr"),
        approved_at=datetime.now(UTC),
    )


async def _two_organizations(engine: AsyncEngine) -> tuple[dict[str, Any], dict[str, Any]]:
    async with engine.begin() as conn:
        return await seed_organization(conn), await seed_organization(conn, "Other Curling Club")


async def refund_world(engine: AsyncEngine, settings: ClubSettings | None = None) -> RefundWorld:
    home, other = await _two_organizations(engine)
    case, foreign = home["refund_case"], other["refund_case"]

    def request(ids: dict[str, str]) -> dict[str, Any]:
        keys = ("payment_id", "line_item_id", "discount_id")
        return {key: ids[key] for key in keys} | {"destination": "account_credit"}

    return OperationWorld(
        operation=RefundMissingDiscount(settings or ClubSettings()),
        scope=Scope(organization_id=home["id"], section="orders", resource_id=case["order_id"]),
        request=request(case),
        foreign_request=request(foreign),
        organization=home,
        other_organization=other,
        other_scope=Scope(
            organization_id=other["id"], section="orders", resource_id=foreign["order_id"]
        ),
    )


async def broadcast_world(engine: AsyncEngine) -> BroadcastWorld:
    home, other = await _two_organizations(engine)
    case, foreign = home["broadcast_case"], other["broadcast_case"]
    draft = {
        "subject": "Spring bonspiel: sign up by March 1",
        "body": "Teams of four, all levels welcome.\n\n**Sign up** at the front desk.",
    }
    return OperationWorld(
        operation=ApplyBroadcastDraft(),
        scope=Scope(organization_id=home["id"], section="email", resource_id=case["broadcast_id"]),
        request={"segment_ids": case["segment_ids"], **draft},
        foreign_request={"segment_ids": foreign["segment_ids"], **draft},
        organization=home,
        other_organization=other,
        other_scope=Scope(
            organization_id=other["id"], section="email", resource_id=foreign["broadcast_id"]
        ),
    )


async def count_rows(conn: AsyncConnection) -> dict[str, int]:
    """What an operation could have written anywhere in the club schema: compare these before
    and after a refusal to prove it stored nothing."""

    async def scalar(query: Any) -> int:
        return int((await conn.execute(query)).scalar_one())

    counts = {
        table.name: await scalar(select(func.count()).select_from(table))
        for table in (t.refunds, t.refund_attempts, t.account_credits)
    }
    p = t.payments
    counts["payment_cents_moved"] = await scalar(
        select(func.coalesce(func.sum(p.c.reserved_cents + p.c.refunded_cents), 0))
    )
    counts["discounts_applied"] = await scalar(
        select(func.count()).where(t.line_item_discounts.c.applied.is_(True))
    )
    counts["broadcast_revisions"] = await scalar(
        select(func.coalesce(func.sum(t.broadcast_forms.c.revision), 0))
    )
    return counts


@dataclass(frozen=True)
class Uncertain:
    """``perform`` raised (``EffectUncertain``, or anything else); the attempt was marked
    unknown."""

    attempt_id: str


class _Driven:
    """A ``signoff_runtime.execution.Ledger`` that keeps nothing: plain transactions, the
    outcome returned as it is (``Uncertain`` for an unknown attempt)."""

    def __init__(
        self,
        engine: AsyncEngine,
        admitted: execution.Admitted,
        provider: Any,
        start: asyncio.Barrier | None,
    ) -> None:
        self.engine, self.admitted, self.client, self.start = engine, admitted, provider, start

    async def transaction(self, body: Callable[[AsyncConnection], Awaitable[R]]) -> R:
        async with self.engine.begin() as conn:
            return await body(conn)

    async def admit(
        self, conn: AsyncConnection, op: AnyOperation
    ) -> execution.Admitted | OperationOutcome | Uncertain:
        await conn.exec_driver_sql("SELECT 1")  # hold a connection before the start line
        if self.start is not None:
            await self.start.wait()
        return self.admitted

    async def conclude(
        self, conn: AsyncConnection, outcome: OperationOutcome, attempt: AttemptRef | None
    ) -> OperationOutcome | Uncertain:
        return outcome

    async def conclude_unknown(
        self, conn: AsyncConnection, attempt: AttemptRef
    ) -> OperationOutcome | Uncertain:
        return Uncertain(attempt.attempt_id)

    async def attempting(
        self, conn: AsyncConnection, attempt: AttemptRef, arguments: Any
    ) -> execution.Attempting:
        return execution.Attempting(attempt, arguments)

    async def holds(
        self, conn: AsyncConnection, attempt: AttemptRef
    ) -> OperationOutcome | Uncertain | None:
        return None

    def provider(self, op: Any) -> AbstractAsyncContextManager[Any]:
        return nullcontext(self.client)

    def performed(self, op: Any, attempt: AttemptRef, error: Exception | None) -> None:
        pass

    async def failed(self, op: AnyOperation, exc: Exception) -> OperationOutcome | Uncertain:
        raise exc

    def record_failed(self, attempt: AttemptRef, exc: Exception) -> None:
        raise exc


async def drive_external(
    operation: ExternalOperation[Any, Any, Any, Any, Any],
    arguments: Any,
    scope: Scope,
    ctx: ExecutionContext,
    engine: AsyncEngine,
    provider: Any,
    *,
    start: asyncio.Barrier | None = None,
) -> OperationOutcome | Uncertain:
    """The executor's attempt protocol (``signoff_runtime.execution``, the executor's own copy):
    revalidate and begin in one committed transaction, call the provider outside any
    transaction, then record (or mark unknown) in a second.

    ``start``: racers wait there with their transaction open, so they revalidate together.
    """
    admitted = execution.Admitted(arguments, scope, ctx)
    return await execution.run(operation, _Driven(engine, admitted, provider, start))
