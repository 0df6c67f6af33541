"""A local operation from contract to outcome, and every way a contract must not run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr
from signoff_contracts.outcomes import RevisionRequired, Succeeded, TerminalFailure
from signoff_contracts.v1 import OutcomeReported
from signoff_executor.settings import ExecutorSettings
from signoff_runtime import keys
from signoff_runtime.registry import Operations
from signoff_runtime.settings import ContractSigningSettings
from signoff_runtime.testing import wait_until
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus

pytestmark = pytest.mark.integration


async def test_local_contract_succeeds_with_its_effect_and_outcome(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account)
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)
        published = await wait_until(
            lambda: bus.drain(bus.topology.name("proposals.outcomes")), what="published outcome"
        )

    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, contract.contract_id) == 1
    [message] = await harness.outbox(engine, contract.proposal_id)
    assert isinstance(message, OutcomeReported)
    assert message.outcome == outcome and message.reported_by == "executor"
    assert message.correlation_id == contract.proposal_id
    [delivered] = published
    assert delivered.message_id == message.message_id
    assert OutcomeReported.model_validate_json(delivered.body).outcome == outcome


async def test_same_contract_delivered_five_times_executes_once(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account)
    async with harness.running(settings, operations):
        await asyncio.gather(*(bus.publish(contract) for _ in range(5)))
        await harness.outcome(engine, contract.contract_id)
        await wait_until(lambda: _settled(bus), what="all five deliveries acked")

    assert await toy.credits_of(engine, contract.contract_id) == 1
    messages = await harness.outbox(engine, contract.proposal_id)
    assert len(messages) == 1  # duplicates re-send the same message id, never a second outcome


async def _settled(bus: Bus) -> bool:
    ready, _ = await bus.depth("executor.contracts")
    return ready == 0


async def test_bad_signature_is_dead_lettered_and_never_run(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    forged = contracts.grant(account).model_copy(update={"signature": "0" * 86})
    unsigned = contracts.grant(account).model_copy(update={"signature": "", "key_id": None})
    tampered = contracts.grant(account)
    tampered = tampered.model_copy(
        update={"arguments": {**tampered.arguments, "amount_cents": 999_999}}
    )
    # signed by a key the executor does not trust: under a kid of its own, and under the
    # trusted kid (a key id only picks the key to check with; it cannot make a signature good)
    _, other, _ = keys.generate()
    stranger = ContractSigningSettings(signing_key=SecretStr(other), key_id="stranger")
    impostor = ContractSigningSettings(signing_key=SecretStr(other), key_id="test-contract")
    foreign = [contracts.grant(account, key=stranger), contracts.grant(account, key=impostor)]
    bad = (forged, unsigned, tampered, *foreign)
    async with harness.running(settings, operations):
        for contract in bad:
            await bus.publish(contract)
        dead = await _dead_letters(bus, len(bad))

    assert sorted(m.headers["x-signoff-reason"] for m in dead) == ["bad_signature"] * len(bad)
    for contract in bad:
        assert await harness.execution(engine, contract.contract_id) is None
        assert await toy.credits_of(engine, contract.contract_id) == 0
        assert await harness.outbox(engine, contract.proposal_id) == []


async def test_unknown_kind_or_version_is_dead_lettered(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    v2 = contracts.contract(toy.GRANT, toy.grant_arguments(account), resource_id=account, version=2)
    unknown = contracts.contract("account.paint", {}, resource_id=account)
    async with harness.running(settings, operations):
        await bus.publish(v2)
        await bus.publish(unknown)
        await bus.publish(b"{not json", message_id="msg_garbage")
        dead = await _dead_letters(bus, 3)

    reasons = sorted(m.headers["x-signoff-reason"] for m in dead)
    assert reasons == ["invalid_message", "unsupported_version", "unsupported_version"]
    for contract in (v2, unknown):
        assert await harness.execution(engine, contract.contract_id) is None
        assert await harness.outbox(engine, contract.proposal_id) == []


async def test_late_contract_requires_revision_and_runs_nothing(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    late = contracts.contract(
        toy.GRANT, toy.grant_arguments(account), resource_id=account, execute_in_s=-1
    )
    async with harness.running(settings, operations):
        await bus.publish(late)
        outcome = await harness.outcome(engine, late.contract_id)

    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.code == "approval_stale"
    assert await toy.credits_of(engine, late.contract_id) == 0
    [message] = await harness.outbox(engine, late.proposal_id)
    assert message.outcome == outcome


async def test_revalidation_failure_requires_revision_and_runs_nothing(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    contract = contracts.grant(account)
    await toy.close(engine, account)  # the fact behind the preview changed
    async with harness.running(settings, operations):
        await bus.publish(contract)
        outcome = await harness.outcome(engine, contract.contract_id)

    assert isinstance(outcome, RevisionRequired)
    assert outcome.reason.code == "account_closed"
    assert await toy.credits_of(engine, contract.contract_id) == 0


async def test_corrupt_arguments_fail_terminally_with_a_correlation_id(
    engine: AsyncEngine, bus: Bus, settings: ExecutorSettings, operations: Operations
) -> None:
    account = await toy.new_account(engine)
    corrupt = contracts.contract(
        toy.GRANT, {"account_id": account, "occasion": 7, "extra": 1}, resource_id=account
    )
    exploding = contracts.grant(account, explode=True)
    async with harness.running(settings, operations):
        await bus.publish(corrupt)
        await bus.publish(exploding)
        corrupt_outcome = await harness.outcome(engine, corrupt.contract_id)
        exploding_outcome = await harness.outcome(engine, exploding.contract_id)

    for outcome in (corrupt_outcome, exploding_outcome):
        assert isinstance(outcome, TerminalFailure)
        assert outcome.correlation_id.startswith("cor_")
        assert "secret" not in outcome.model_dump_json()
    assert await toy.credits_of(engine, corrupt.contract_id) == 0
    assert await toy.credits_of(engine, exploding.contract_id) == 0


async def _dead_letters(bus: Bus, count: int) -> list[Any]:
    taken: list[Any] = []

    async def probe() -> bool:
        taken.extend(await bus.dead_letters())
        return len(taken) >= count

    await wait_until(probe, what=f"{count} dead letters")
    return taken
