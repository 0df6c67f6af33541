"""The approver's authorization is checked again at execution, in the execution transaction.

Between approval and execution the approver's membership can end or their role shrink; the
contract then ends as ``RevisionRequired(approver_no_longer_authorized)`` and nothing runs: no
domain row, no provider call. Negative control: ``SIGNOFF_UNSAFE__SKIP_EXECUTION_AUTHZ`` runs
the same contract.
"""

from __future__ import annotations

import pytest
from signoff_conformance.toy.vouchers import VoucherProvider, voucher_key
from signoff_contracts.outcomes import RevisionRequired, Succeeded
from signoff_contracts.reasons import APPROVER_NO_LONGER_AUTHORIZED
from signoff_contracts.v1 import OutcomeReported
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.registry import Operations
from signoff_runtime.settings import UnsafeSettings
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus

pytestmark = pytest.mark.integration


def _no_longer_authorized(outcome: object, approver: str) -> bool:
    return (
        isinstance(outcome, RevisionRequired)
        and outcome.reason.code == APPROVER_NO_LONGER_AUTHORIZED
        and outcome.reason.params == {"approved_by": approver}
    )


@pytest.mark.parametrize("change", ["viewer", None], ids=["downgraded", "membership_ended"])
async def test_a_local_contract_of_an_approver_no_longer_authorized_does_not_run(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    change: str | None,
) -> None:
    account = await toy.new_account(engine)
    approver = await toy.new_member(engine, "manager")
    contract = contracts.grant(account, approved_by=approver)  # approved while a manager
    await toy.set_role(engine, approver, change)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert _no_longer_authorized(outcome, approver), outcome
    assert await toy.credits_of(engine, contract.contract_id) == 0
    [message] = await harness.outbox(engine, contract.proposal_id)
    assert isinstance(message, OutcomeReported) and message.outcome == outcome


@pytest.mark.parametrize("change", ["viewer", None], ids=["downgraded", "membership_ended"])
async def test_an_external_contract_of_an_approver_no_longer_authorized_calls_nobody(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    provider: VoucherProvider,
    change: str | None,
) -> None:
    account = await toy.new_account(engine)
    approver = await toy.new_member(engine, "manager")
    contract = contracts.voucher(account, approved_by=approver)
    await toy.set_role(engine, approver, change)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert _no_longer_authorized(outcome, approver), outcome
    assert provider.calls[voucher_key(contract.proposal_id)] == 0
    assert provider.effects(voucher_key(contract.proposal_id)) == 0
    assert await toy.voucher_status(engine, contract.proposal_id) is None


@pytest.mark.parametrize("removed", [0, 1], ids=["first_approver", "final_approver"])
async def test_each_approver_of_a_two_person_contract_is_checked_again(
    engine: AsyncEngine,
    bus: Bus,
    settings: ExecutorSettings,
    operations: Operations,
    removed: int,
) -> None:
    """A policy needed two managers: if either has left by execution, the quorum no longer
    stands — nothing runs, and the reason names who left."""
    account = await toy.new_account(engine)
    first, final = [await toy.new_member(engine, "manager") for _ in range(2)]
    contract = contracts.grant(account, approved_by=final, approvers=[first, final])
    gone = (first, final)[removed]
    await toy.set_role(engine, gone, None)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert _no_longer_authorized(outcome, gone), outcome
    assert await toy.credits_of(engine, contract.contract_id) == 0


async def test_an_approver_still_authorized_runs_as_before(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    approver = await toy.new_member(engine, "manager")
    contract = contracts.grant(account, approved_by=approver)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, contract.contract_id) == 1


async def test_negative_control_skip_execution_authz_runs_a_revoked_approvers_contract(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    approver = await toy.new_member(engine, "manager")
    contract = contracts.grant(account, approved_by=approver)
    await toy.set_role(engine, approver, None)
    unsafe = ExecutorSettings.model_validate(
        {
            **settings.model_dump(),
            "unsafe": UnsafeSettings(skip_execution_authz=True).model_dump(),
        }
    )
    async with harness.running(unsafe, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, contract.contract_id) == 1
