"""An external operation through the attempt protocol: one provider call, never a second one."""

from __future__ import annotations

import pytest
from signoff_conformance.toy.vouchers import VoucherProvider, voucher_key
from signoff_contracts.outcomes import NeedsReconciliation, RevisionRequired, Succeeded
from signoff_contracts.v1 import OutcomeReported, ReconciliationRequired
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.registry import Operations
from signoff_runtime.testing import wait_until
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus

pytestmark = pytest.mark.integration


async def test_answered_call_succeeds_once(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, Succeeded) and outcome.result["code"].startswith("vch_")
    assert provider.calls[voucher_key(contract.proposal_id)] == 1
    assert provider.effects(voucher_key(contract.proposal_id)) == 1
    assert await toy.voucher_status(engine, contract.proposal_id) == "succeeded"
    assert provider.opened == provider.closed == 1  # one client for the whole process


async def test_refused_call_requires_revision(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    provider.script[voucher_key(contract.proposal_id)] = "refuse"
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, RevisionRequired) and outcome.reason.code == "voucher_refused"
    assert provider.effects(voucher_key(contract.proposal_id)) == 0
    assert await toy.voucher_status(engine, contract.proposal_id) == "refused"


async def test_changed_facts_stop_the_attempt_before_the_provider(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    await toy.close(engine, account)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, RevisionRequired) and outcome.reason.code == "account_closed"
    assert provider.calls[voucher_key(contract.proposal_id)] == 0
    assert await toy.voucher_status(engine, contract.proposal_id) is None


async def test_lost_response_is_handed_to_the_reconciler_without_a_second_call(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
) -> None:
    """The executor's part of a lost response: NeedsReconciliation plus ReconciliationRequired,
    one provider call. The reconciler's part runs in its own tests and, with the real
    processes, in ``tests/e2e``."""
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    provider.script[voucher_key(contract.proposal_id)] = "lose"
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert outcome == NeedsReconciliation(
        status_path=f"/v1/proposals/{contract.proposal_id}/reconciliation"
    )
    messages = await harness.outbox(engine, contract.proposal_id)
    [required] = [m for m in messages if isinstance(m, ReconciliationRequired)]
    [reported] = [m for m in messages if isinstance(m, OutcomeReported)]
    assert reported.outcome == outcome
    assert required.attempt_id == (await harness.execution(engine, contract.contract_id)).attempt_id
    assert provider.calls[voucher_key(contract.proposal_id)] == 1  # called once, never again
    assert provider.effects(voucher_key(contract.proposal_id)) == 1


async def test_redelivered_attempting_contract_never_calls_again(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
) -> None:
    """An executor dies while the provider call is under way; the redelivery asks nobody."""
    account = await toy.new_account(engine)
    contract = contracts.voucher(account)
    provider.script[voucher_key(contract.proposal_id)] = "hang"
    dying = settings.model_copy(
        update={"executor": settings.executor.model_copy(update={"graceful_timeout_s": 0.3})}
    )
    async with harness.running(dying, operations):
        await bus.publish(contract)
        await wait_until(lambda: _calls(provider, contract.proposal_id), what="the first call")
        row = await harness.execution(engine, contract.contract_id)
        assert row.status == "attempting"
    # stopped past its graceful timeout: the delivery was never acked and goes back to the queue

    async with harness.running(settings, operations):
        outcome = await harness.outcome(engine, contract.contract_id)
    provider.release()  # the dead executor's call ends without an answer

    assert isinstance(outcome, NeedsReconciliation)
    assert provider.calls[voucher_key(contract.proposal_id)] == 1
    assert await toy.voucher_status(engine, contract.proposal_id) == "unknown"
    kinds = [type(m).__name__ for m in await harness.outbox(engine, contract.proposal_id)]
    assert sorted(kinds) == ["OutcomeReported", "ReconciliationRequired"]


async def _calls(provider: VoucherProvider, proposal_id: str) -> bool:
    return provider.calls[voucher_key(proposal_id)] == 1
