"""The executor's negative controls really turn their protection off.

``SIGNOFF_UNSAFE__NO_DEDUP``: a contract delivered again executes again (the safe executor runs it
once: ``test_local``). ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``: the outcome is published
directly after the commit and never written to the outbox, so a process that dies in between
leaves nothing behind to send it.
"""

from __future__ import annotations

from typing import Any

import pytest
from signoff_conformance.toy.directory import ToyDirectory
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import Envelope, ExecutionContract, OutcomeReported
from signoff_executor.execution import Executor
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations
from signoff_runtime.settings import UnsafeSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import Topology
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus

pytestmark = pytest.mark.integration


def _switched(settings: ExecutorSettings, **switches: bool) -> ExecutorSettings:
    return ExecutorSettings.model_validate(
        {**settings.model_dump(), "unsafe": UnsafeSettings(**switches).model_dump()}
    )


class DiesAfterCommit(DirectPublisher):
    """The process is killed once the transaction committed, before it could publish."""

    def __init__(self) -> None:
        super().__init__("amqp://unused")
        self.lost: list[Envelope] = []

    async def publish(self, message: Envelope, **_: Any) -> None:
        self.lost.append(message)


def _executor(
    engine: AsyncEngine, topology: Topology, operations: Operations, direct: DirectPublisher | None
) -> Executor:
    return Executor(
        engine=engine,
        topology=topology,
        operations=operations,
        directory=ToyDirectory(),
        verifying=contracts.VERIFYING,
        providers=Providers(),
        perform_timeout_s=5.0,
        direct=direct,
    )


async def test_no_dedup_executes_a_redelivered_contract_again(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account)
    async with harness.running(_switched(settings, no_dedup=True), operations):
        await bus.publish(contract)
        await harness.outcome(engine, contract.contract_id)
        await bus.publish(contract)

        async def twice() -> bool:
            return await toy.credits_of(engine, contract.contract_id) == 2

        await wait_until(twice, what="the redelivered contract to run again")


async def test_publish_without_outbox_still_delivers_the_outcome_when_nothing_fails(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account)
    async with harness.running(_switched(settings, publish_without_outbox=True), operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)
        [delivered] = await wait_until(
            lambda: bus.drain(bus.topology.name("proposals.outcomes")), what="published outcome"
        )

    assert OutcomeReported.model_validate_json(delivered.body).outcome == outcome
    assert await harness.outbox(engine, contract.proposal_id) == []


@pytest.mark.parametrize("unsafe", [False, True], ids=["outbox", "publish_without_outbox"])
async def test_a_crash_between_commit_and_publish_loses_the_outcome_only_without_the_outbox(
    engine: AsyncEngine,
    settings: ExecutorSettings,
    operations: Operations,
    topology: Topology,
    unsafe: bool,
) -> None:
    account = await toy.new_account(engine)
    contract: ExecutionContract = contracts.grant(account)
    crash = DiesAfterCommit()
    executor = _executor(engine, topology, operations, crash if unsafe else None)

    outcome = await executor.handle(contract.model_dump_json().encode())

    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, contract.contract_id) == 1
    kept = await harness.outbox(engine, contract.proposal_id)
    if unsafe:
        assert kept == [] and [m.type for m in crash.lost] == ["execution.outcome"]
    else:
        assert [m.outcome for m in kept] == [outcome] and crash.lost == []
