"""A connection lost during COMMIT: the executor re-reads the row instead of guessing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from signoff_conformance.toy.vouchers import VoucherProvider, voucher_key
from signoff_contracts.outcomes import Succeeded
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.metrics import COMMITS_IN_DOUBT
from signoff_runtime.registry import Operations
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus
from support.pgproxy import CommitDropper

pytestmark = pytest.mark.integration


def _in_doubt(resolution: str) -> float:
    return COMMITS_IN_DOUBT.labels(resolution)._value.get()


async def test_commit_that_did_not_land_is_redone_from_the_row(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account, die_at_commit=await toy.commit_killer(engine))
    before = _in_doubt("rolled_back")
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert _in_doubt("rolled_back") == before + 1  # the first COMMIT really was cut
    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, contract.contract_id) == 1
    assert len(await harness.outbox(engine, contract.proposal_id)) == 1


@pytest_asyncio.fixture
async def proxy(database_url: str) -> AsyncIterator[CommitDropper]:
    url = make_url(database_url)
    dropper = CommitDropper(url.host or "127.0.0.1", url.port or 5432)
    await dropper.start()
    yield dropper
    await dropper.close()


async def test_attempt_whose_commit_answer_was_lost_is_performed_once(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
    proxy: CommitDropper,
) -> None:
    """The attempt did commit: re-reading shows it, so the call goes ahead — once — instead of
    the contract being handed to the reconciler for nothing (or, worse, the call repeated)."""
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    proxied_url = make_url(settings.db.url).set(port=proxy.port)
    proxied = settings.model_copy(
        update={
            "db": settings.db.model_copy(
                update={"url": proxied_url.render_as_string(hide_password=False)}
            )
        }
    )
    proxy.arm(voucher_key(contract.proposal_id))  # sent in the attempt's transaction only
    before = _in_doubt("committed")
    async with harness.running(proxied, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert proxy.dropped == 1
    assert _in_doubt("committed") == before + 1
    assert isinstance(outcome, Succeeded)
    assert provider.calls[voucher_key(contract.proposal_id)] == 1
    assert await toy.voucher_status(engine, contract.proposal_id) == "succeeded"
