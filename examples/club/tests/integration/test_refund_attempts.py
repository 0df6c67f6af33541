"""The attempt protocol of ``order.refund_missing_discount`` against the card-provider
simulator, run as a real process: success, a lost answer and its reconciliation, a provider
that never got the call, a provider that refused, and the local destinations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import SimulatorAdmin
from signoff_club import tables as t
from signoff_club.operations.refund_missing_discount import RefundResult
from signoff_club.refunds import Refunded
from signoff_club.settings import ClubSettings
from signoff_club.testing import (
    RefundWorld,
    Uncertain,
    drive_external,
    execution_context,
    refund_world,
)
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import RevisionRequired, Succeeded
from sqlalchemy import Interval, literal, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


@pytest.fixture
async def card_world(engine: AsyncEngine, club_settings: ClubSettings) -> RefundWorld:
    return await refund_world(engine, club_settings)


async def _arguments(engine: AsyncEngine, world: RefundWorld, destination: str) -> Any:
    op = world.operation
    request = op.parse_request({**world.request, "destination": destination})
    async with engine.connect() as conn:
        return (await op.resolve(request, world.scope, conn)).arguments


async def _state(engine: AsyncEngine, world: RefundWorld) -> dict[str, Any]:
    case = world.organization["refund_case"]
    async with engine.connect() as conn:
        payment = (
            await conn.execute(select(t.payments).where(t.payments.c.id == case["payment_id"]))
        ).one()
        total = (
            await conn.execute(
                select(t.orders.c.total_cents).where(t.orders.c.id == case["order_id"])
            )
        ).scalar_one()
        applied = (
            await conn.execute(
                select(t.line_item_discounts.c.applied).where(
                    t.line_item_discounts.c.line_item_id == case["line_item_id"],
                    t.line_item_discounts.c.discount_id == case["discount_id"],
                )
            )
        ).scalar_one()
        refunds = (
            await conn.execute(
                select(t.refunds.c.amount_cents, t.refunds.c.status, t.refunds.c.destination).where(
                    t.refunds.c.payment_id == case["payment_id"]
                )
            )
        ).all()
    return {
        "refunded": payment.refunded_cents,
        "reserved": payment.reserved_cents,
        "total": total,
        "applied": applied,
        "refunds": [tuple(r) for r in refunds],
    }


async def _attempt(engine: AsyncEngine, attempt_id: str) -> Any:
    async with engine.connect() as conn:
        a = t.refund_attempts
        return (await conn.execute(select(a).where(a.c.id == attempt_id))).one()


async def _expire_lease(engine: AsyncEngine, attempt_id: str) -> None:
    """Move the lease back instead of waiting it out: deadlines are the database's clock."""
    a = t.refund_attempts
    hour = literal(timedelta(hours=1), Interval())
    async with engine.begin() as conn:
        await conn.execute(
            update(a).where(a.c.id == attempt_id).values(lease_until=a.c.lease_until - hour)
        )


async def test_a_card_refund_succeeds_once_and_records_idempotently(
    engine: AsyncEngine, card_world: RefundWorld, provider: CardProviderClient
) -> None:
    op, ctx = card_world.operation, execution_context()
    args = await _arguments(engine, card_world, "original_payment_method")
    outcome = await drive_external(op, args, card_world.scope, ctx, engine, provider)
    assert isinstance(outcome, Succeeded)
    result = RefundResult.model_validate(outcome.result)
    assert (result.amount_cents, result.destination, result.resulting_order_total_cents) == (
        3_500,
        "card_refund",
        40_999,
    )
    assert await _state(engine, card_world) == {
        "refunded": 3_500,
        "reserved": 0,
        "total": 40_999,
        "applied": True,
        "refunds": [(3_500, "succeeded", "card_refund")],
    }
    key = f"signoff-refund-{ctx.proposal_id}"
    found = await provider.find_by_key(key)
    assert found is not None and found.amount_cents == 3_500 and found.currency == "cad"
    async with engine.begin() as conn:
        attempt_id = (
            await conn.execute(
                select(t.refund_attempts.c.id).where(
                    t.refund_attempts.c.proposal_id == ctx.proposal_id
                )
            )
        ).scalar_one()
        again = await op.record(AttemptRef(attempt_id, key), Refunded(found.id, 3_500), conn)
    assert again == outcome
    assert len((await _state(engine, card_world))["refunds"]) == 1


async def test_a_lost_answer_is_reconciled_by_lookup_not_replay(
    engine: AsyncEngine,
    card_world: RefundWorld,
    provider: CardProviderClient,
    provider_admin: SimulatorAdmin,
) -> None:
    op = card_world.operation
    args = await _arguments(engine, card_world, "original_payment_method")
    await provider_admin.set_faults(rules=[{"mode": "drop_response", "count": 1}])
    uncertain = await drive_external(
        op, args, card_world.scope, execution_context(), engine, provider
    )
    assert isinstance(uncertain, Uncertain)
    assert (await _attempt(engine, uncertain.attempt_id)).status == "unknown"
    state = await _state(engine, card_world)
    assert (state["reserved"], state["refunded"], state["refunds"]) == (3_500, 0, [])
    creates_before = (await provider_admin.ledger())["requests"]["create"]
    async with engine.begin() as conn:
        outcome = await op.reconcile(uncertain.attempt_id, conn, provider)
    assert isinstance(outcome, Succeeded)
    assert (await provider_admin.ledger())["requests"]["create"] == creates_before
    assert (await _state(engine, card_world))["refunds"] == [(3_500, "succeeded", "card_refund")]
    async with engine.begin() as conn:
        assert await op.reconcile(uncertain.attempt_id, conn, provider) == outcome


async def test_a_call_that_never_reached_the_provider_waits_out_the_lease(
    engine: AsyncEngine, card_world: RefundWorld, provider: CardProviderClient
) -> None:
    op, ctx = card_world.operation, execution_context()
    args = await _arguments(engine, card_world, "original_payment_method")
    async with engine.begin() as conn:  # the executor began, then died before calling
        assert await op.revalidate(args, card_world.scope, conn) is None
        attempt = await op.begin_attempt(args, card_world.scope, ctx, conn)
    async with engine.begin() as conn:
        await op.mark_unknown(attempt, conn)
    async with engine.begin() as conn:
        assert await op.reconcile(attempt.attempt_id, conn, provider) is None
    assert (await _attempt(engine, attempt.attempt_id)).status == "unknown"
    await _expire_lease(engine, attempt.attempt_id)
    async with engine.begin() as conn:
        outcome = await op.reconcile(attempt.attempt_id, conn, provider)
    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.code == "refund_not_applied"
    assert (await _attempt(engine, attempt.attempt_id)).status == "not_applied"
    state = await _state(engine, card_world)
    assert (state["reserved"], state["refunded"], state["applied"]) == (0, 0, False)
    assert await provider.find_by_key(attempt.idempotency_key) is None


async def test_a_provider_that_failed_before_applying_releases_the_reservation(
    engine: AsyncEngine,
    card_world: RefundWorld,
    provider: CardProviderClient,
    provider_admin: SimulatorAdmin,
) -> None:
    op = card_world.operation
    args = await _arguments(engine, card_world, "original_payment_method")
    await provider_admin.set_faults(rules=[{"mode": "fail_before", "count": 1}])
    outcome = await drive_external(
        op, args, card_world.scope, execution_context(), engine, provider
    )
    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.code == "provider_unavailable"
    state = await _state(engine, card_world)
    assert (state["reserved"], state["refunded"], state["applied"]) == (0, 0, False)
    # the discount is owed again: a new proposal may refund it
    retry = await drive_external(
        op,
        await _arguments(engine, card_world, "original_payment_method"),
        card_world.scope,
        execution_context(),
        engine,
        provider,
    )
    assert isinstance(retry, Succeeded)


async def test_a_refusal_by_the_provider_asks_for_a_revision(
    engine: AsyncEngine, card_world: RefundWorld, provider: CardProviderClient
) -> None:
    """Same key, different amount: the provider refuses (422), nothing moves."""
    op, ctx = card_world.operation, execution_context()
    args = await _arguments(engine, card_world, "original_payment_method")
    key = f"signoff-refund-{ctx.proposal_id}"
    await provider.refund(key, args.payment_ref, 1, "cad")  # someone used the key before
    outcome = await drive_external(op, args, card_world.scope, ctx, engine, provider)
    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.model_dump() == {
        "code": "refund_declined",
        "params": {"provider_code": "idempotency_key_reused"},
    }
    state = await _state(engine, card_world)
    assert (state["reserved"], state["refunded"], state["applied"]) == (0, 0, False)


@pytest.mark.parametrize(
    ("method", "requested", "destination", "status"),
    [
        ("card", "account_credit", "account_credit", "succeeded"),
        ("e_transfer", "original_payment_method", "e_transfer_return", "recorded"),
    ],
)
async def test_local_destinations_never_call_the_provider(
    engine: AsyncEngine,
    card_world: RefundWorld,
    provider: CardProviderClient,
    provider_admin: SimulatorAdmin,
    method: str,
    requested: str,
    destination: str,
    status: str,
) -> None:
    case = card_world.organization["refund_case"]
    if method != "card":
        async with engine.begin() as conn:
            await conn.execute(
                update(t.payments)
                .where(t.payments.c.id == case["payment_id"])
                .values(method=method, provider_ref=None)
            )
    args = await _arguments(engine, card_world, requested)
    assert args.destination == destination
    requests_before = (await provider_admin.ledger())["requests"]
    outcome = await drive_external(
        card_world.operation, args, card_world.scope, execution_context(), engine, provider
    )
    assert isinstance(outcome, Succeeded)
    assert (await provider_admin.ledger())["requests"] == requests_before
    assert (await _state(engine, card_world))["refunds"] == [(3_500, status, destination)]
    async with engine.connect() as conn:
        credits = (
            (
                await conn.execute(
                    select(t.account_credits.c.amount_cents)
                    .join(t.refunds, t.refunds.c.id == t.account_credits.c.refund_id)
                    .where(t.refunds.c.payment_id == case["payment_id"])
                )
            )
            .scalars()
            .all()
        )
    assert credits == ([3_500] if destination == "account_credit" else [])


async def test_a_local_attempt_left_pending_is_concluded_after_its_lease(
    engine: AsyncEngine, refund_world: RefundWorld, provider: CardProviderClient
) -> None:
    op, ctx = refund_world.operation, execution_context()
    args = await _arguments(engine, refund_world, "account_credit")
    async with engine.begin() as conn:
        assert await op.revalidate(args, refund_world.scope, conn) is None
        attempt = await op.begin_attempt(args, refund_world.scope, ctx, conn)
    async with engine.begin() as conn:
        assert await op.reconcile(attempt.attempt_id, conn, provider) is None
    await _expire_lease(engine, attempt.attempt_id)
    async with engine.begin() as conn:
        outcome = await op.reconcile(attempt.attempt_id, conn, provider)
    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.code == "refund_not_applied"
    state = await _state(engine, refund_world)
    assert (state["reserved"], state["applied"], state["refunds"]) == (0, False, [])
    assert (await _attempt(engine, attempt.attempt_id)).status == "not_applied"


async def test_a_second_attempt_for_one_proposal_is_refused_by_the_database(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    op, ctx = refund_world.operation, execution_context(new_id("prp"))
    args = await _arguments(engine, refund_world, "account_credit")
    async with engine.begin() as conn:
        await op.begin_attempt(args, refund_world.scope, ctx, conn)
    async with engine.connect() as conn:
        await conn.execute(
            update(t.line_item_discounts)
            .values(applied=False)
            .where(t.line_item_discounts.c.applied_proposal_id == ctx.proposal_id)
        )
        # a hot statement (signoff_runtime.hot): asyncpg's own error, not SQLAlchemy's wrapper
        with pytest.raises(asyncpg.UniqueViolationError, match="proposal_id"):
            await op.begin_attempt(args, refund_world.scope, ctx, conn)
        await conn.rollback()
