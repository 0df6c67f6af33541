"""``order.refund_missing_discount`` under the operation conformance kit.

Two destinations, two classes, because they take different roads through the same attempt
protocol: ``card_refund`` calls the card-provider simulator (a real process, the session's
``card_provider``), so the kit's lost-answer and reconcile checks meet a real dropped
connection; ``account_credit`` is applied by ``record`` alone and must never reach the
provider, even when the provider would misbehave.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from functools import partial
from typing import Any

import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import SimulatorAdmin
from signoff_club import tables as t
from signoff_club import testing
from signoff_club.directory import ClubDirectory
from signoff_club.operations.refund_missing_discount import RECHECKED, RefundMissingDiscount
from signoff_club.settings import ClubSettings
from signoff_conformance import (
    ConformanceCase,
    OperationConformance,
    StaleFact,
    actors,
    new_context,
    resolve_request,
    run_external,
    stored,
)
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation, AttemptRef, Resolved
from signoff_contracts.outcomes import Succeeded
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

#: what each out-of-scope request must be rejected with (proves it names the foreign record)
OUT_OF_SCOPE_CODES = {
    "other_orgs_payment": "payment_not_found",
    "other_orgs_line_item": "line_item_not_found",
    "other_orgs_discount": "discount_not_found",
    "other_orgs_whole_request": "payment_not_found",
    "no_such_payment": "payment_not_found",
}
#: what each stale fact must fail with (proves the fact breaks what its name says)
STALE_CODES = {
    "discount_applied_elsewhere": "discount_already_applied",
    "discount_no_longer_owed": "discount_not_applicable",
    "line_item_repriced": "amount_changed",
    "discount_value_changed": "amount_changed",
    "payment_partially_refunded_elsewhere": "insufficient_refundable",
    "unresolved_attempt_exists": "refund_in_progress",
    "order_total_changed_elsewhere": "order_total_changed",
    "product_repriced_in_catalog": "product_configuration_changed",
    "product_renamed": "product_configuration_changed",
}
CARD_STALE_CODES = {**STALE_CODES, "card_charge_replaced": "destination_unsupported"}


def out_of_scope(world: testing.RefundWorld) -> dict[str, dict[str, Any]]:
    mine, theirs = world.request, world.foreign_request
    return {
        "other_orgs_payment": {**mine, "payment_id": theirs["payment_id"]},
        "other_orgs_line_item": {**mine, "line_item_id": theirs["line_item_id"]},
        "other_orgs_discount": {**mine, "discount_id": theirs["discount_id"]},
        "other_orgs_whole_request": {**theirs, "destination": mine["destination"]},
        "no_such_payment": {**mine, "payment_id": new_id("pay")},
    }


def stale_facts(world: testing.RefundWorld, *, card: bool) -> dict[str, StaleFact]:
    """Mutations of the facts the preview rests on, each through the connection given."""
    ids = world.organization["refund_case"]
    evidence, payments = t.line_item_discounts, t.payments
    owed = (evidence.c.line_item_id == ids["line_item_id"]) & (
        evidence.c.discount_id == ids["discount_id"]
    )

    async def discount_applied_elsewhere(conn: AsyncConnection) -> None:
        await conn.execute(
            update(evidence).where(owed).values(applied=True, applied_proposal_id=new_id("prp"))
        )

    async def discount_no_longer_owed(conn: AsyncConnection) -> None:
        await conn.execute(evidence.delete().where(owed))

    async def line_item_repriced(conn: AsyncConnection) -> None:
        await conn.execute(
            update(t.line_items)
            .where(t.line_items.c.id == ids["line_item_id"])
            .values(unit_price_cents=29_999, amount_cents=29_999)
        )

    async def discount_value_changed(conn: AsyncConnection) -> None:
        await conn.execute(
            update(t.discounts).where(t.discounts.c.id == ids["discount_id"]).values(value=1_500)
        )

    async def payment_partially_refunded_elsewhere(conn: AsyncConnection) -> None:
        """Another refund left 30.00 of the 35.00 owed refundable."""
        await conn.execute(
            update(payments)
            .where(payments.c.id == ids["payment_id"])
            .values(refunded_cents=payments.c.amount_cents - 3_000)
        )

    async def unresolved_attempt_exists(conn: AsyncConnection) -> None:
        """Another proposal's refund of the same payment whose answer never came back."""
        proposal_id = new_id("prp")
        await conn.execute(
            t.refund_attempts.insert().values(
                id=new_id("att"),
                proposal_id=proposal_id,
                organization_id=world.scope.organization_id,
                order_id=ids["order_id"],
                payment_id=ids["payment_id"],
                line_item_id=new_id("lin"),
                discount_id=new_id("dsc"),
                destination="card_refund",
                amount_cents=100,
                currency="CAD",
                idempotency_key=f"signoff-refund-{proposal_id}",
                status="unknown",
                lease_until=func.now(),
                client_timeout_s=5.0,
                request={},
            )
        )

    async def order_total_changed_elsewhere(conn: AsyncConnection) -> None:
        """Another line of the order got 25.00 off: the totals the preview showed are wrong."""
        lines, orders = t.line_items, t.orders
        await conn.execute(
            update(lines)
            .where(lines.c.order_id == ids["order_id"], lines.c.id != ids["line_item_id"])
            .values(amount_cents=lines.c.amount_cents - 2_500)
        )
        await conn.execute(
            update(orders)
            .where(orders.c.id == ids["order_id"])
            .values(total_cents=orders.c.total_cents - 2_500)
        )

    async def card_charge_replaced(conn: AsyncConnection) -> None:
        await conn.execute(
            update(payments)
            .where(payments.c.id == ids["payment_id"])
            .values(provider_ref=f"ch_replaced_{new_id('pay')}")
        )

    def the_product() -> Any:
        lines = t.line_items
        return select(lines.c.product_id).where(lines.c.id == ids["line_item_id"])

    async def product_repriced_in_catalog(conn: AsyncConnection) -> None:
        """The catalog's price moved; the line keeps its sale price, so the amount does not."""
        await conn.execute(
            update(t.products)
            .where(t.products.c.id == the_product().scalar_subquery())
            .values(unit_price_cents=t.products.c.unit_price_cents + 1_000)
        )

    async def product_renamed(conn: AsyncConnection) -> None:
        await conn.execute(
            update(t.products)
            .where(t.products.c.id == the_product().scalar_subquery())
            .values(name="Adult league — winter season")
        )

    facts: dict[str, StaleFact] = {
        "discount_applied_elsewhere": discount_applied_elsewhere,
        "discount_no_longer_owed": discount_no_longer_owed,
        "line_item_repriced": line_item_repriced,
        "discount_value_changed": discount_value_changed,
        "payment_partially_refunded_elsewhere": payment_partially_refunded_elsewhere,
        "unresolved_attempt_exists": unresolved_attempt_exists,
        "order_total_changed_elsewhere": order_total_changed_elsewhere,
        "product_repriced_in_catalog": product_repriced_in_catalog,
        "product_renamed": product_renamed,
    }
    return facts | ({"card_charge_replaced": card_charge_replaced} if card else {})


def effect_counter(
    engine: AsyncEngine, order_id: str, payment_ref: str, admin: SimulatorAdmin
) -> Callable[[], Awaitable[int]]:
    """Money moved for this order, by the provider's ledger *and* by the club's records.

    One refund leaves two rows (a refund row and a provider effect, or a refund row and a
    credit), so the rows are not summed: money moved (provider effects for this charge, plus
    account credits) and refunds recorded are counted apart, and the larger is the number of
    effects — a duplicate on either side shows.
    """

    async def count() -> int:
        refunds, credits = t.refunds, t.account_credits
        async with engine.connect() as conn:
            recorded = await conn.scalar(
                select(func.count()).select_from(refunds).where(refunds.c.order_id == order_id)
            )
            credited = await conn.scalar(
                select(func.count())
                .select_from(credits.join(refunds, refunds.c.id == credits.c.refund_id))
                .where(refunds.c.order_id == order_id)
            )
        ledger = (await admin.ledger())["items"]
        charged = sum(1 for effect in ledger if effect["payment_ref"] == payment_ref)
        return max(int(recorded or 0), charged + int(credited or 0))

    return count


async def refund_owed(engine: AsyncEngine, line_item_id: str, discount_id: str) -> int:
    """The discount's worth on its line, recomputed here from the rows."""
    sql = (
        "SELECT li.quantity, li.unit_price_cents, li.amount_cents, d.kind, d.value"
        " FROM club.line_items li JOIN club.line_item_discounts lid ON lid.line_item_id = li.id"
        " JOIN club.discounts d ON d.id = lid.discount_id"
        " WHERE li.id = :line AND d.id = :discount AND NOT lid.applied"
    )
    async with engine.connect() as conn:
        row = await conn.execute(text(sql), {"line": line_item_id, "discount": discount_id})
        quantity, unit, line, kind, value = row.one()
    if kind == "percentage":
        worth = Decimal(quantity * unit * value) / Decimal(10_000)
        owed = int(worth.quantize(Decimal(1), rounding=ROUND_HALF_UP))
    else:
        owed = value
    return int(max(0, min(owed, line)))


async def attempt_exists(conn: AsyncConnection, attempt: AttemptRef) -> bool:
    a = t.refund_attempts
    found = await conn.scalar(
        select(func.count()).where(
            a.c.id == attempt.attempt_id, a.c.idempotency_key == attempt.idempotency_key
        )
    )
    return found == 1


async def refund_case(
    engine: AsyncEngine, settings: ClubSettings, admin: SimulatorAdmin, *, requested: str
) -> ConformanceCase:
    world = await testing.refund_world(engine, settings)
    world = replace(world, request={**world.request, "destination": requested})
    ids = world.organization["refund_case"]
    async with engine.connect() as conn:
        payment_ref = await conn.scalar(
            select(t.payments.c.provider_ref).where(t.payments.c.id == ids["payment_id"])
        )
    assert payment_ref is not None

    async def lose_next_response() -> None:
        rule = {"mode": "drop_response", "count": 1, "payment_ref": payment_ref}
        await admin.set_faults(rules=[rule])

    org = world.organization
    manager, viewer = await actors(
        engine,
        ClubDirectory(),
        org["id"],
        manager=org["users"]["manager"]["id"],
        viewer=org["users"]["viewer"]["id"],
    )
    return ConformanceCase(
        scope=world.scope,
        manager=manager,
        viewer=viewer,
        valid_request=world.request,
        out_of_scope_requests=out_of_scope(world),
        stale_facts=stale_facts(world, card=requested == "original_payment_method"),
        engine=engine,
        count_effects=effect_counter(engine, ids["order_id"], payment_ref, admin),
        provider_factory=partial(CardProviderClient, settings.provider_url, timeout_s=2.0),
        lose_next_response=lose_next_response,
        attempt_exists=attempt_exists,
    )


class RefundChecks(OperationConformance):
    """The kit's checks, plus: each request and fact fails for the reason its name gives."""

    operation = RefundMissingDiscount
    out_of_scope_codes = OUT_OF_SCOPE_CODES
    stale_codes = STALE_CODES

    async def check_resolved(self, case: ConformanceCase, resolved: Resolved[Any, Any]) -> None:
        """The amount is what the rows say the discount was worth (half up to the cent, capped
        at what the line costs), as the operation's docstring states the rule."""
        arguments = resolved.arguments
        assert arguments.order_id == case.scope.resource_id
        owed = await refund_owed(case.engine, arguments.line_item_id, arguments.discount_id)
        assert arguments.amount_cents == owed == resolved.preview.amount_cents

    async def test_a_contract_without_the_configuration_fingerprint_fails_closed(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """A contract frozen before the fingerprint existed cannot prove the configuration."""
        args = (await resolve_request(op, case, case.valid_request)).arguments
        old = stored(op, args.model_copy(update={"product_configuration": None}))
        async with case.engine.connect() as conn, conn.begin():
            reason = await op.revalidate(old, case.scope, conn)
        assert reason is not None and reason.code == "product_configuration_changed"

    async def test_the_preview_says_whether_the_product_changed_since_the_sale(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        assert (
            await resolve_request(op, case, case.valid_request)
        ).preview.product_configuration_unchanged
        async with case.engine.begin() as conn:
            await conn.execute(
                update(t.products)
                .where(
                    t.products.c.id
                    == select(t.line_items.c.product_id)
                    .where(t.line_items.c.id == case.valid_request["line_item_id"])
                    .scalar_subquery()
                )
                .values(unit_price_cents=t.products.c.unit_price_cents + 1_000)
            )
        resolved = await resolve_request(op, case, case.valid_request)
        assert resolved.preview.product_configuration_unchanged is False

    async def test_the_result_says_what_was_done_and_what_was_rechecked(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        run = await run_external(op, case, new_context(case), arguments)
        assert run.status == "executed" and isinstance(run.outcome, Succeeded), run
        result = op.parse_result(run.outcome.result)
        assert result.rechecked == RECHECKED
        said = op.render_result(result, "en")
        assert "35.00 CAD" in said and "409.99 CAD" in said, said
        if result.destination == "card_refund":
            assert result.card_last4 == "4242" and result.provider_refund_id
            assert f"the card ending 4242 (refund {result.provider_refund_id})" in said


class TestRefundToCardConformance(RefundChecks):
    """``original_payment_method`` on a card payment: the provider is really called."""

    stale_codes = CARD_STALE_CODES

    @pytest.fixture
    async def case(
        self, engine: AsyncEngine, club_settings: ClubSettings, provider_admin: SimulatorAdmin
    ) -> ConformanceCase:
        return await refund_case(
            engine, club_settings, provider_admin, requested="original_payment_method"
        )


class TestRefundToAccountCreditConformance(RefundChecks):
    """``account_credit``: the same attempt protocol, with no provider call at all.

    Two kit checks assume ``perform`` calls the provider; for a local destination the
    promise is the opposite, so they are overridden to prove that instead.
    """

    @pytest.fixture
    async def case(
        self, engine: AsyncEngine, club_settings: ClubSettings, provider_admin: SimulatorAdmin
    ) -> ConformanceCase:
        return await refund_case(engine, club_settings, provider_admin, requested="account_credit")

    async def test_attempt_is_committed_before_the_provider_is_called(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """Overridden: the attempt is committed, and ``perform`` never calls the provider."""
        assert case.attempt_exists is not None
        calls: list[AttemptRef] = []

        async def called(attempt: AttemptRef) -> None:
            calls.append(attempt)

        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        run = await run_external(op, case, new_context(case), arguments, on_provider_call=called)
        assert run.status == "executed" and isinstance(run.outcome, Succeeded), run
        assert calls == [], "a local destination called the card provider"
        assert run.attempt is not None
        async with case.engine.connect() as conn:
            assert await case.attempt_exists(conn, run.attempt)

    async def test_lost_response_is_reconciled_to_one_effect(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """Overridden: with a lost answer scripted at the provider, a local destination is
        untouched by it — it executes (no ``EffectUncertain``) with one effect."""
        assert case.lose_next_response is not None
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        before = await case.count_effects()
        await case.lose_next_response()
        run = await run_external(op, case, new_context(case), arguments)
        assert run.status == "executed" and isinstance(run.outcome, Succeeded), run
        assert await case.count_effects() - before == 1
