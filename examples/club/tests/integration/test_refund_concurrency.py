"""Two approved refunds racing for one payment: exactly one runs, the other must be revised.

Each side does what the executor does — its own connection, one transaction: revalidate
(locking the order, then the payment), begin the attempt, commit — and the two start together.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import SimulatorAdmin
from signoff_club import tables as t
from signoff_club.settings import ClubSettings
from signoff_club.testing import (
    RefundWorld,
    drive_external,
    execution_context,
    refund_world,
)
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import RevisionRequired, Succeeded
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def _arguments(engine: AsyncEngine, world: RefundWorld, request: dict[str, Any]) -> Any:
    op = world.operation
    async with engine.connect() as conn:
        return (await op.resolve(op.parse_request(request), world.scope, conn)).arguments


async def _add_owed_discount(engine: AsyncEngine, world: RefundWorld, cents: int) -> str:
    """A second discount owed on the same line (fixed ``cents``)."""
    case = world.organization["refund_case"]
    discount_id = new_id("dsc")
    async with engine.begin() as conn:
        await conn.execute(
            t.discounts.insert().values(
                id=discount_id,
                organization_id=world.organization["id"],
                name="Loyalty",
                kind="fixed",
                value=cents,
            )
        )
        await conn.execute(
            t.line_item_discounts.insert().values(
                line_item_id=case["line_item_id"], discount_id=discount_id
            )
        )
    return discount_id


async def _leave_refundable(engine: AsyncEngine, world: RefundWorld, cents: int) -> None:
    payment_id = world.organization["refund_case"]["payment_id"]
    async with engine.begin() as conn:
        await conn.execute(
            update(t.payments)
            .where(t.payments.c.id == payment_id)
            .values(refunded_cents=t.payments.c.amount_cents - cents)
        )


async def _payment(engine: AsyncEngine, world: RefundWorld) -> Any:
    payment_id = world.organization["refund_case"]["payment_id"]
    async with engine.connect() as conn:
        return (await conn.execute(select(t.payments).where(t.payments.c.id == payment_id))).one()


def _split(outcomes: list[Any]) -> tuple[list[Succeeded], list[RevisionRequired]]:
    won = [o for o in outcomes if isinstance(o, Succeeded)]
    lost = [o for o in outcomes if isinstance(o, RevisionRequired)]
    assert len(won) + len(lost) == len(outcomes), outcomes
    return won, lost


async def test_two_proposals_for_one_discount_credit_it_once(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    op = refund_world.operation
    first = await _arguments(engine, refund_world, refund_world.request)
    second = await _arguments(engine, refund_world, refund_world.request)
    start = asyncio.Barrier(2)
    outcomes = await asyncio.gather(
        *(
            drive_external(
                op, args, refund_world.scope, execution_context(), engine, None, start=start
            )
            for args in (first, second)
        )
    )
    won, lost = _split(list(outcomes))
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].reason.code == "discount_already_applied"
    payment = await _payment(engine, refund_world)
    assert (payment.refunded_cents - 0, payment.reserved_cents) == (3_500, 0)
    async with engine.connect() as conn:
        credits = (
            (
                await conn.execute(
                    select(t.account_credits.c.amount_cents)
                    .join(t.refunds, t.refunds.c.id == t.account_credits.c.refund_id)
                    .where(t.refunds.c.payment_id == payment.id)
                )
            )
            .scalars()
            .all()
        )
    assert credits == [3_500]


async def test_two_discounts_exceeding_what_is_left_refund_only_one(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    loyalty = await _add_owed_discount(engine, refund_world, 2_500)
    await _leave_refundable(engine, refund_world, 4_000)  # 3 500 + 2 500 > 4 000
    early = await _arguments(engine, refund_world, refund_world.request)
    late = await _arguments(engine, refund_world, {**refund_world.request, "discount_id": loyalty})
    start = asyncio.Barrier(2)
    outcomes = await asyncio.gather(
        *(
            drive_external(
                refund_world.operation,
                args,
                refund_world.scope,
                execution_context(),
                engine,
                None,
                start=start,
            )
            for args in (early, late)
        )
    )
    won, lost = _split(list(outcomes))
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].reason.code == "insufficient_refundable"
    payment = await _payment(engine, refund_world)
    assert payment.amount_cents - payment.refunded_cents in (4_000 - 3_500, 4_000 - 2_500)
    assert payment.reserved_cents == 0


async def test_two_card_refunds_reach_the_provider_once(
    engine: AsyncEngine,
    club_settings: ClubSettings,
    provider: CardProviderClient,
    provider_admin: SimulatorAdmin,
) -> None:
    world = await refund_world(engine, club_settings)
    loyalty = await _add_owed_discount(engine, world, 2_500)
    await _leave_refundable(engine, world, 4_000)
    card = {**world.request, "destination": "original_payment_method"}
    early = await _arguments(engine, world, card)
    late = await _arguments(engine, world, {**card, "discount_id": loyalty})
    assert early.destination == late.destination == "card_refund"
    contexts = [execution_context(), execution_context()]
    start = asyncio.Barrier(2)
    outcomes = await asyncio.gather(
        *(
            drive_external(world.operation, args, world.scope, ctx, engine, provider, start=start)
            for args, ctx in zip((early, late), contexts, strict=True)
        )
    )
    won, lost = _split(list(outcomes))
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].reason.code in {"insufficient_refundable", "refund_in_progress"}
    per_key = (await provider_admin.ledger())["effects_per_key"]
    keys = [f"signoff-refund-{ctx.proposal_id}" for ctx in contexts]
    assert sum(per_key.get(key, 0) for key in keys) == 1
    refunds = await provider.list_refunds(payment_ref=early.payment_ref)
    assert [r.amount_cents for r in refunds] == [won[0].result["amount_cents"]]
