"""``order.refund_missing_discount`` resolve: exact arguments and preview, or a reason code —
and a refusal stores nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from signoff_club import tables as t
from signoff_club.testing import RefundWorld, count_rows
from signoff_contracts.operations import Rejected, Scope
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def _resolve(
    engine: AsyncEngine, world: RefundWorld, request: dict[str, Any], scope: Scope | None = None
) -> Any:
    op = world.operation
    async with engine.connect() as conn:
        return await op.resolve(op.parse_request(request), scope or world.scope, conn)


async def _rejected(
    engine: AsyncEngine, world: RefundWorld, request: dict[str, Any], scope: Scope | None = None
) -> Rejected:
    async with engine.connect() as conn:
        before = await count_rows(conn)
    with pytest.raises(Rejected) as caught:
        await _resolve(engine, world, request, scope)
    async with engine.connect() as conn:
        assert await count_rows(conn) == before
    return caught.value


async def test_a_card_refund_resolves_to_exact_arguments_and_preview(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    request = {**refund_world.request, "destination": "original_payment_method"}
    resolved = await _resolve(engine, refund_world, request)
    case = refund_world.organization["refund_case"]
    args = resolved.arguments.model_dump()
    assert args["amount_cents"] == 3_500 and args["currency"] == "CAD"
    assert args["destination"] == "card_refund" and args["payment_ref"].startswith("ch_demo_")
    assert {k: args[k] for k in case} == case
    assert resolved.preview.model_dump() == {
        "participant_name": "Alex Tremblay",
        "product_name": "Adult league — fall season",
        "discount_name": "Early-bird 10 %",
        "payment_method": "card",
        "amount_cents": 3_500,
        "currency": "CAD",
        "current_order_total_cents": 44_499,
        "resulting_order_total_cents": 40_999,
        "destination": "card_refund",
        "product_configuration_unchanged": True,
    }


async def test_account_credit_carries_no_card_reference(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    resolved = await _resolve(engine, refund_world, refund_world.request)
    assert resolved.arguments.destination == "account_credit"
    assert resolved.arguments.payment_ref is None


async def test_an_amount_from_the_model_is_refused_before_anything_runs(
    refund_world: RefundWorld,
) -> None:
    with pytest.raises(ValidationError, match="amount_cents"):
        refund_world.operation.parse_request({**refund_world.request, "amount_cents": 1})


@pytest.mark.parametrize(
    ("foreign_field", "code"),
    [
        ("payment_id", "payment_not_found"),
        ("line_item_id", "line_item_not_found"),
        ("discount_id", "discount_not_found"),
    ],
)
async def test_another_organizations_id_is_not_found(
    engine: AsyncEngine, refund_world: RefundWorld, foreign_field: str, code: str
) -> None:
    request = {**refund_world.request, foreign_field: refund_world.foreign_request[foreign_field]}
    assert (await _rejected(engine, refund_world, request)).reason.code == code


async def test_another_organizations_order_is_not_found(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    scope = refund_world.scope.model_copy(
        update={"resource_id": refund_world.other_scope.resource_id}
    )
    rejected = await _rejected(engine, refund_world, refund_world.foreign_request, scope)
    assert rejected.reason.code == "order_not_found"


async def test_a_discount_not_evidenced_for_the_line_item(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    sibling = await _other_discount_of(engine, refund_world)
    request = {**refund_world.request, "discount_id": sibling}
    assert (await _rejected(engine, refund_world, request)).reason.code == "discount_not_applicable"


async def test_a_discount_already_applied(engine: AsyncEngine, refund_world: RefundWorld) -> None:
    case = refund_world.organization["refund_case"]
    async with engine.begin() as conn:
        await conn.execute(
            update(t.line_item_discounts)
            .where(t.line_item_discounts.c.line_item_id == case["line_item_id"])
            .values(applied=True)
        )
    rejected = await _rejected(engine, refund_world, refund_world.request)
    assert rejected.reason.code == "discount_already_applied"


async def test_nothing_left_to_refund(engine: AsyncEngine, refund_world: RefundWorld) -> None:
    case = refund_world.organization["refund_case"]
    async with engine.begin() as conn:
        await conn.execute(
            update(t.payments)
            .where(t.payments.c.id == case["payment_id"])
            .values(refunded_cents=t.payments.c.amount_cents)
        )
    assert (await _rejected(engine, refund_world, refund_world.request)).reason.code == (
        "nothing_to_refund"
    )


async def test_less_left_than_the_discount(engine: AsyncEngine, refund_world: RefundWorld) -> None:
    case = refund_world.organization["refund_case"]
    async with engine.begin() as conn:
        await conn.execute(
            update(t.payments)
            .where(t.payments.c.id == case["payment_id"])
            .values(refunded_cents=t.payments.c.amount_cents - 1_000)
        )
    rejected = await _rejected(engine, refund_world, refund_world.request)
    assert rejected.reason.model_dump() == {
        "code": "insufficient_refundable",
        "params": {"amount_cents": 3_500, "refundable_cents": 1_000},
    }


@pytest.mark.parametrize(
    ("method", "destination"),
    [("cash", None), ("e_transfer", "e_transfer_return")],
)
async def test_original_payment_method_per_method(
    engine: AsyncEngine, refund_world: RefundWorld, method: str, destination: str | None
) -> None:
    case = refund_world.organization["refund_case"]
    async with engine.begin() as conn:
        await conn.execute(
            update(t.payments)
            .where(t.payments.c.id == case["payment_id"])
            .values(method=method, provider_ref=None)
        )
    request = {**refund_world.request, "destination": "original_payment_method"}
    if destination is None:
        rejected = await _rejected(engine, refund_world, request)
        assert rejected.reason.code == "destination_unsupported"
        assert rejected.reason.params["payment_method"] == "cash"
    else:
        resolved = await _resolve(engine, refund_world, request)
        assert resolved.arguments.destination == destination
        assert resolved.preview.payment_method == method


async def _other_discount_of(engine: AsyncEngine, world: RefundWorld) -> str:
    """The club's other discount (evidenced for the clinic line, not the league line)."""
    case = world.organization["refund_case"]
    async with engine.connect() as conn:
        return str(
            (
                await conn.execute(
                    select(t.discounts.c.id).where(
                        t.discounts.c.organization_id == world.organization["id"],
                        t.discounts.c.id != case["discount_id"],
                    )
                )
            ).scalar_one()
        )
