"""What the reconciler asks of ``order.refund_missing_discount`` beyond ``reconcile``: a lookup
(never a replay) past the provider's idempotency window, the stranded attempts its scan opens
checks for, and an operator's verdict recorded in the club's own tables."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import SimulatorAdmin
from signoff_club import refunds
from signoff_club import tables as t
from signoff_club.refunds import Refunded
from signoff_club.settings import ClubSettings
from signoff_club.testing import (
    RefundWorld,
    Uncertain,
    drive_external,
    execution_context,
    refund_world,
)
from signoff_contracts.operations import AttemptRef, EffectUncertain
from signoff_contracts.outcomes import Succeeded, TerminalFailure
from sqlalchemy import Interval, func, literal, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


@pytest.fixture
async def card_world(engine: AsyncEngine, club_settings: ClubSettings) -> RefundWorld:
    return await refund_world(engine, club_settings)


async def _begin(engine: AsyncEngine, world: RefundWorld, destination: str) -> AttemptRef:
    """The executor recorded the attempt (and died before calling, or is still calling)."""
    op, ctx = world.operation, execution_context()
    request = op.parse_request({**world.request, "destination": destination})
    async with engine.begin() as conn:
        arguments = (await op.resolve(request, world.scope, conn)).arguments
        assert await op.revalidate(arguments, world.scope, conn) is None
        attempt: AttemptRef = await op.begin_attempt(arguments, world.scope, ctx, conn)
    return attempt


async def _age(engine: AsyncEngine, attempt_id: str, hours: int = 1) -> None:
    a = t.refund_attempts
    back = literal(timedelta(hours=hours), Interval())
    async with engine.begin() as conn:
        await conn.execute(
            update(a).where(a.c.id == attempt_id).values(lease_until=a.c.lease_until - back)
        )


async def _row(engine: AsyncEngine, attempt_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                select(t.refund_attempts).where(t.refund_attempts.c.id == attempt_id)
            )
        ).one()


async def test_past_the_idempotency_window_the_refund_is_looked_up_never_replayed(
    engine: AsyncEngine,
    card_world: RefundWorld,
    provider: CardProviderClient,
    provider_admin: SimulatorAdmin,
) -> None:
    op = card_world.operation
    request = op.parse_request({**card_world.request, "destination": "original_payment_method"})
    async with engine.connect() as conn:
        arguments = (await op.resolve(request, card_world.scope, conn)).arguments
    await provider_admin.set_faults(rules=[{"mode": "drop_response", "count": 1}])
    lost = await drive_external(
        op, arguments, card_world.scope, execution_context(), engine, provider
    )
    assert isinstance(lost, Uncertain)
    await provider_admin.advance_clock(3 * 86_400)  # the provider forgot the key
    before = (await provider_admin.ledger())["requests"]

    async with engine.begin() as conn:
        outcome = await op.reconcile(lost.attempt_id, conn, provider)

    after = (await provider_admin.ledger())["requests"]
    assert isinstance(outcome, Succeeded)
    assert (after["create"], after["replay"]) == (before["create"], before["replay"])
    assert after["lookup"] > before["lookup"]


async def test_only_attempts_past_their_lease_and_timeout_are_stranded(
    engine: AsyncEngine, card_world: RefundWorld
) -> None:
    op = card_world.operation
    fresh = await _begin(engine, card_world, "original_payment_method")
    async with engine.connect() as conn:
        assert fresh.attempt_id not in [s.attempt_id for s in await op.stranded_attempts(conn, 0)]
    await _age(engine, fresh.attempt_id)
    async with engine.connect() as conn:
        found = {s.attempt_id: s for s in await op.stranded_attempts(conn, 60)}
        later = {s.attempt_id for s in await op.stranded_attempts(conn, 7_200)}
    stranded = found[fresh.attempt_id]
    row = await _row(engine, fresh.attempt_id)
    assert (stranded.proposal_id, stranded.organization_id) == (
        row.proposal_id,
        row.organization_id,
    )
    assert stranded.contract_id is not None and stranded.contract_id.startswith("ctr_")
    assert fresh.attempt_id not in later  # not yet two hours past its deadline


async def test_an_operator_verdict_is_recorded_in_the_club_once(
    engine: AsyncEngine, card_world: RefundWorld
) -> None:
    op = card_world.operation
    applied = await _begin(engine, card_world, "original_payment_method")
    async with engine.begin() as conn:
        outcome = await op.settle_by_operator(applied.attempt_id, conn, applied=True)
    async with engine.begin() as conn:
        again = await op.settle_by_operator(applied.attempt_id, conn, applied=False)

    assert isinstance(outcome, Succeeded) and again == outcome  # concluded: kept as it was
    assert (await _row(engine, applied.attempt_id)).status == "succeeded"
    async with engine.connect() as conn:
        refunds = (
            await conn.execute(
                select(t.refunds.c.provider_refund_id, t.refunds.c.status).where(
                    t.refunds.c.proposal_id == (await _row(engine, applied.attempt_id)).proposal_id
                )
            )
        ).all()
    assert [tuple(r) for r in refunds] == [(None, "succeeded")]  # no provider id is known


async def test_an_operator_failing_an_attempt_releases_its_reservation(
    engine: AsyncEngine, card_world: RefundWorld
) -> None:
    op = card_world.operation
    attempt = await _begin(engine, card_world, "original_payment_method")
    async with engine.begin() as conn:
        outcome = await op.settle_by_operator(attempt.attempt_id, conn, applied=False)

    assert isinstance(outcome, TerminalFailure)
    assert (await _row(engine, attempt.attempt_id)).status == "failed"
    payment_id = card_world.organization["refund_case"]["payment_id"]
    async with engine.connect() as conn:
        reserved = (
            await conn.execute(
                select(t.payments.c.reserved_cents).where(t.payments.c.id == payment_id)
            )
        ).scalar_one()
    assert reserved == 0


async def test_an_answer_that_comes_after_the_deadline_is_left_to_the_reconciler(
    engine: AsyncEngine, card_world: RefundWorld
) -> None:
    """Past its deadline the attempt is the reconciler's: the executor's late answer is not
    recorded (it would be a second conclusion beside the reconciler's), so the attempt stays
    open for the reconciler to conclude once, by key."""
    op = card_world.operation
    attempt = await _begin(engine, card_world, "original_payment_method")
    await _age(engine, attempt.attempt_id)

    async with engine.begin() as conn:
        with pytest.raises(EffectUncertain):
            await op.record(attempt, Refunded("re_late", 3_500), conn)

    assert (await _row(engine, attempt.attempt_id)).status == "pending"
    assert attempt.lease_s == card_world.operation.settings.attempt_lease_s


async def test_the_scan_waits_for_an_answer_being_recorded_and_skips_what_it_concluded(
    engine: AsyncEngine, card_world: RefundWorld
) -> None:
    """A scan that runs while an answer is being recorded must not open a check for the attempt
    that answer concludes (the check would report the outcome a second time)."""
    op = card_world.operation
    attempt = await _begin(engine, card_world, "original_payment_method")
    await _age(engine, attempt.attempt_id)
    a = t.refund_attempts
    async with engine.connect() as recording:
        transaction = await recording.begin()
        await refunds.get_attempt(recording, attempt.attempt_id, lock=True)
        await recording.execute(
            update(a).where(a.c.id == attempt.attempt_id).values(status="succeeded")
        )
        pid = (await recording.execute(select(func.pg_backend_pid()))).scalar_one()

        async def scan() -> list[str]:
            async with engine.connect() as conn:
                return [s.attempt_id for s in await op.stranded_attempts(conn, 0)]

        scanning = asyncio.create_task(scan())
        await _until_blocked_by(engine, pid)
        await transaction.commit()
        found = await asyncio.wait_for(scanning, 10)

    assert attempt.attempt_id not in found


async def _until_blocked_by(engine: AsyncEngine, pid: int, deadline_s: float = 10.0) -> None:
    """Wait until some backend waits on a lock ``pid`` holds."""
    loop = asyncio.get_running_loop()
    until = loop.time() + deadline_s
    while loop.time() < until:
        async with engine.connect() as conn:
            blocked = (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE :pid = ANY(pg_blocking_pids(pid))"
                    ),
                    {"pid": pid},
                )
            ).scalar_one()
        if blocked:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing waited on backend {pid} within {deadline_s} s")
