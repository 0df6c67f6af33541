"""Competing executors: every contract runs once, however many executors and deliveries."""

from __future__ import annotations

import asyncio

import pytest
from signoff_conformance.toy.vouchers import SendVoucher, VoucherProvider
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.registry import Operations
from signoff_runtime.testing import wait_until
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus
from support.toy import FaultyGrant

pytestmark = pytest.mark.integration


async def test_two_executors_and_fifty_contracts_delivered_twice_run_each_once(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, provider: VoucherProvider
) -> None:
    account = await toy.new_account(engine)
    batch = [contracts.grant(account) for _ in range(50)]
    first, second = FaultyGrant(), FaultyGrant()
    ops_a = Operations([first, SendVoucher(provider)])
    ops_b = Operations([second, SendVoucher(provider)])
    async with harness.running(settings, ops_a), harness.running(settings, ops_b):
        # every contract twice, interleaved, so both executors race on the same contract ids
        await asyncio.gather(*(bus.publish(c) for c in batch + batch))
        await wait_until(
            lambda: _done(engine, [c.contract_id for c in batch]), timeout=30, what="50 outcomes"
        )
        await wait_until(lambda: _drained(bus), what="every delivery settled")

    async with engine.connect() as conn:
        effects: dict[str, int] = dict(
            (
                await conn.execute(
                    text(
                        "SELECT split_part(dedup_key, '/', 1) AS contract_id, count(*) "
                        "FROM conformance_toy.credits "
                        "WHERE split_part(dedup_key, '/', 1) = ANY(:ids) GROUP BY 1"
                    ),
                    {"ids": [c.contract_id for c in batch]},
                )
            ).all()
        )
        outcomes = (
            await conn.execute(
                text("SELECT count(*) FROM executor.outbox WHERE correlation_id = ANY(:ids)"),
                {"ids": [c.proposal_id for c in batch]},
            )
        ).scalar_one()
    assert effects == {c.contract_id: 1 for c in batch}
    assert outcomes == 50
    assert first.executed + second.executed == 50
    assert first.executed > 0 and second.executed > 0, "both executors should have taken work"


async def _done(engine: AsyncEngine, ids: list[str]) -> bool:
    async with engine.connect() as conn:
        done = (
            await conn.execute(
                text(
                    "SELECT count(*) FROM executor.executions "
                    "WHERE contract_id = ANY(:ids) AND status = 'done'"
                ),
                {"ids": ids},
            )
        ).scalar_one()
    return bool(done == len(ids))


async def _drained(bus: Bus) -> bool:
    ready, _ = await bus.depth("executor.contracts")
    return ready == 0
