"""``order.waive_late_fee`` under the operation conformance kit (a local operation).

Its test world: two fresh clubs from the seed, each with a late fee charged onto its order.
"""

from __future__ import annotations

from typing import Any

import pytest
from signoff_club import tables as t
from signoff_club.directory import ClubDirectory
from signoff_club.operations.waive_late_fee import WaiveLateFee, late_fees
from signoff_club.seed import seed_organization
from signoff_conformance import ConformanceCase, OperationConformance, StaleFact, actors
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Resolved, Scope
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

FEE_CENTS = 1_500


async def _charged(conn: AsyncConnection, org: dict[str, Any]) -> str:
    """A late fee of 15.00 charged onto the organization's seeded order (its total grows)."""
    order_id, fee_id = org["refund_case"]["order_id"], new_id("lfe")
    await conn.execute(
        late_fees.insert().values(
            id=fee_id, order_id=order_id, description="Returned 3 days late", amount_cents=FEE_CENTS
        )
    )
    o = t.orders
    await conn.execute(
        update(o).where(o.c.id == order_id).values(total_cents=o.c.total_cents + FEE_CENTS)
    )
    return fee_id


def stale_facts(fee_id: str, order_id: str) -> dict[str, StaleFact]:
    f, o = late_fees, t.orders

    async def waived_elsewhere(conn: AsyncConnection) -> None:
        await conn.execute(
            update(f).where(f.c.id == fee_id).values(status="waived", waived_proposal_id="prp_x")
        )

    async def fee_amount_changed(conn: AsyncConnection) -> None:
        await conn.execute(update(f).where(f.c.id == fee_id).values(amount_cents=2_000))

    async def order_total_changed_elsewhere(conn: AsyncConnection) -> None:
        await conn.execute(
            update(o).where(o.c.id == order_id).values(total_cents=o.c.total_cents - 500)
        )

    async def fee_removed(conn: AsyncConnection) -> None:
        await conn.execute(f.delete().where(f.c.id == fee_id))

    return {
        "waived_elsewhere": waived_elsewhere,
        "fee_amount_changed": fee_amount_changed,
        "order_total_changed_elsewhere": order_total_changed_elsewhere,
        "fee_removed": fee_removed,
    }


class TestWaiveLateFeeConformance(OperationConformance):
    operation = WaiveLateFee
    out_of_scope_codes = {
        "other_orgs_fee": "late_fee_not_found",
        "no_such_fee": "late_fee_not_found",
    }
    stale_codes = {
        "waived_elsewhere": "late_fee_already_waived",
        "fee_amount_changed": "amount_changed",
        "order_total_changed_elsewhere": "order_total_changed",
        "fee_removed": "late_fee_not_found",
    }

    @pytest.fixture
    async def case(self, engine: AsyncEngine) -> ConformanceCase:
        async with engine.begin() as conn:
            home, other = await seed_organization(conn), await seed_organization(conn)
            ours, theirs = await _charged(conn, home), await _charged(conn, other)
        order_id = home["refund_case"]["order_id"]
        manager, viewer = await actors(
            engine,
            ClubDirectory(),
            home["id"],
            manager=home["users"]["manager"]["id"],
            viewer=home["users"]["viewer"]["id"],
        )

        async def cents_waived() -> int:
            """Update-only: each waiver takes the fee off the order's total once, so the
            effects are the cents taken off, in fees (a second waiver would show as two)."""
            async with engine.connect() as conn:
                total = await conn.scalar(
                    select(t.orders.c.total_cents).where(t.orders.c.id == order_id)
                )
                fees = await conn.scalar(
                    select(func.count()).where(
                        late_fees.c.waived_proposal_id.is_not(None),
                        late_fees.c.order_id == order_id,
                    )
                )
            return max(int(fees or 0), (start - int(total or 0)) // FEE_CENTS)

        async with engine.connect() as conn:
            start = int(
                await conn.scalar(select(t.orders.c.total_cents).where(t.orders.c.id == order_id))
                or 0
            )
        return ConformanceCase(
            scope=Scope(organization_id=home["id"], section="orders", resource_id=order_id),
            manager=manager,
            viewer=viewer,
            valid_request={"late_fee_id": ours},
            out_of_scope_requests={
                "other_orgs_fee": {"late_fee_id": theirs},
                "no_such_fee": {"late_fee_id": new_id("lfe")},
            },
            stale_facts=stale_facts(ours, order_id),
            engine=engine,
            count_effects=cents_waived,
        )

    async def check_resolved(self, case: ConformanceCase, resolved: Resolved[Any, Any]) -> None:
        assert resolved.arguments.amount_cents == FEE_CENTS == resolved.preview.amount_cents
        assert resolved.arguments.order_id == case.scope.resource_id
