"""Escalating (never failing) a check past the bound, the stranded-attempt scan, and what an
operator may do to a check: check it now, resolve it by hand — once — against real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from signoff_contracts.ids import new_id
from signoff_contracts.operations import StrandedAttempt
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import OutcomeReported, ReconciliationChecked, ReconciliationRequired
from signoff_reconciler import handlers, metrics, operators, repository
from signoff_reconciler.checks import Checker
from signoff_reconciler.operators import OperatorRefused
from signoff_reconciler.settings import ReconcilerGroup
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations
from signoff_runtime.topology import Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def required(attempt_id: str | None = None) -> ReconciliationRequired:
    proposal_id = new_id("prp")
    return ReconciliationRequired(
        source="executor",
        correlation_id=proposal_id,
        proposal_id=proposal_id,
        contract_id=new_id("ctr"),
        organization_id="org_test",
        operation_kind="ledger.transfer",
        contract_version=1,
        attempt_id=attempt_id or new_id("att"),
    )


@asynccontextmanager
async def checker(
    engine: AsyncEngine, topology: Topology, operations: Operations, **settings: Any
) -> AsyncIterator[Checker]:
    async with AsyncExitStack() as stack:
        providers = Providers()
        await providers.open(stack, operations)
        yield Checker(
            engine=engine,
            topology=topology,
            operations=operations,
            providers=providers,
            settings=ReconcilerGroup(**settings),
        )


async def outbox(engine: AsyncEngine, proposal_id: str, kind: str) -> list[Any]:
    model = OutcomeReported if kind == "execution.outcome" else ReconciliationChecked
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT body FROM reconciler.outbox WHERE correlation_id = :p "
                "AND message_type = :t ORDER BY id"
            ),
            {"p": proposal_id, "t": kind},
        )
        return [model.model_validate_json(bytes(r.body)) for r in rows]


async def check_row(engine: AsyncEngine, attempt_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM reconciler.checks WHERE attempt_id = :a"), {"a": attempt_id}
            )
        ).first()


async def open_check(engine: AsyncEngine, message: ReconciliationRequired) -> None:
    async with engine.begin() as conn:
        assert await repository.record(conn, message)


async def _age(engine: AsyncEngine, attempt_id: str, hours: int = 2) -> None:
    """Make the check look opened ``hours`` ago, and due now (the database clock decides)."""
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE reconciler.checks SET created_at = now() - make_interval(hours => :age), "
                "next_check_at = now() WHERE attempt_id = :a"
            ),
            {"a": attempt_id, "age": hours},
        )


async def _escalated(
    engine: AsyncEngine, topology: Topology, operations: Operations, message: ReconciliationRequired
) -> None:
    """A check that stayed inconclusive past the bound: escalated by its second check."""
    await open_check(engine, message)
    async with checker(engine, topology, operations, escalate_after_s=3600) as c:
        assert await c.pass_once() >= 1  # young: inconclusive, asked again soon
        await _age(engine, message.attempt_id)
        assert await c.pass_once() >= 1


async def test_a_check_past_the_bound_is_escalated_not_failed_and_checked_more_slowly(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    message = required()
    escalated = metrics.ESCALATED.labels("ledger.transfer")._value.get()
    await _escalated(engine, topology, operations, message)

    row = await check_row(engine, message.attempt_id)
    assert row.status == "open" and row.outcome is None and row.escalated_at is not None
    assert await outbox(engine, message.proposal_id, "execution.outcome") == []  # no "failed"
    first, second = await outbox(engine, message.proposal_id, "execution.reconciliation_checked")
    assert (first.check, first.result, first.escalated) == (1, "pending", False)
    assert (second.check, second.result, second.escalated) == (2, "pending", True)
    assert second.detail is not None and "escalated" in second.detail
    assert second.next_check_at is not None and first.next_check_at is not None
    async with engine.connect() as conn:
        wait_s = (
            await conn.execute(
                text("SELECT extract(epoch FROM CAST(:at AS timestamptz) - now())::float8"),
                {"at": second.next_check_at},
            )
        ).scalar_one()
    assert wait_s > 3000  # the slower pace: escalated_check_every_s, not the 2 s back-off
    assert metrics.ESCALATED.labels("ledger.transfer")._value.get() == escalated + 1

    async with checker(engine, topology, operations, escalate_after_s=3600) as c:
        await c.observe()
        assert metrics.OLDEST_OPEN_CHECK._value.get() >= 7200
        assert metrics.ESCALATED_OPEN_CHECKS._value.get() >= 1
        await _age(engine, message.attempt_id, 3)  # due again, still no answer
        assert await c.pass_once() >= 1
    third = (await outbox(engine, message.proposal_id, "execution.reconciliation_checked"))[-1]
    assert (third.check, third.result, third.escalated) == (3, "pending", False)  # alerted once
    assert metrics.ESCALATED.labels("ledger.transfer")._value.get() == escalated + 1
    assert (await check_row(engine, message.attempt_id)).status == "open"
    assert transfer.asked[message.attempt_id] == 3


async def test_a_late_provider_answer_concludes_an_escalated_check(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    message = required()
    await _escalated(engine, topology, operations, message)
    transfer.script[message.attempt_id] = [Succeeded(result={"amount": 35})]
    await _age(engine, message.attempt_id, 72)
    async with checker(engine, topology, operations, escalate_after_s=3600) as c:
        assert await c.pass_once() >= 1

    row = await check_row(engine, message.attempt_id)
    assert (row.status, row.resolved_by, row.outcome["type"]) == (
        "resolved",
        "reconciler",
        "succeeded",
    )
    [report] = await outbox(engine, message.proposal_id, "execution.outcome")
    assert report.outcome == Succeeded(result={"amount": 35}) and report.reported_by == "reconciler"
    last = (await outbox(engine, message.proposal_id, "execution.reconciliation_checked"))[-1]
    assert (last.check, last.result) == (3, "applied")


async def test_an_operator_concludes_an_escalated_check(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    message = required()
    await _escalated(engine, topology, operations, message)

    state, outcome = await operators.resolve(
        engine,
        topology,
        operations,
        message.proposal_id,
        verdict="succeeded",
        operator="alice",
        note="the provider's dashboard shows it",
    )

    assert (state.status, state.operator) == ("resolved", "alice")
    assert state.escalated_at is not None  # the history keeps when it was escalated
    [report] = await outbox(engine, message.proposal_id, "execution.outcome")
    assert (report.outcome, report.reported_by, report.operator) == (outcome, "operator", "alice")
    assert transfer.verdicts == {message.attempt_id: True}


async def test_the_scan_opens_stranded_attempts_and_their_outcome_waits_for_the_contract(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    known = StrandedAttempt(new_id("att"), new_id("prp"), "org_test", new_id("ctr"))
    unknown = StrandedAttempt(new_id("att"), new_id("prp"), "org_test", None)
    transfer.stranded = [known, unknown]
    for attempt in (known, unknown):
        transfer.script[attempt.attempt_id] = [Succeeded(result={"amount": 3})]
    async with checker(engine, topology, operations) as c:
        assert await c.scan_once() == 2
        assert await c.scan_once() == 0  # one check per attempt, however often found
        while await c.pass_once():
            pass

    assert (await check_row(engine, unknown.attempt_id)).found_by == "scan"
    [direct] = await outbox(engine, known.proposal_id, "execution.outcome")
    assert direct.contract_id == known.contract_id and direct.causation_id is None
    assert await outbox(engine, unknown.proposal_id, "execution.outcome") == []  # withheld
    [seen] = await outbox(engine, unknown.proposal_id, "execution.reconciliation_checked")
    assert seen.result == "applied"

    late = required(unknown.attempt_id).model_copy(
        update={"proposal_id": unknown.proposal_id, "correlation_id": unknown.proposal_id}
    )
    for copy in (late, late.model_copy(update={"message_id": new_id("msg")})):
        fresh = await handlers.record(engine, operations, copy.model_dump_json().encode(), topology)
        assert not fresh
    [report] = await outbox(engine, unknown.proposal_id, "execution.outcome")
    assert report.contract_id == late.contract_id and report.outcome.type == "succeeded"
    assert report.causation_id == late.message_id
    assert (await check_row(engine, unknown.attempt_id)).outcome_message_id == report.message_id
    assert transfer.asked[unknown.attempt_id] == 1


async def test_check_now_makes_the_check_due_and_waits_for_it(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    message = required()
    await open_check(engine, message)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE reconciler.checks SET next_check_at = now() + interval '1 hour', "
                "checks = 4 WHERE attempt_id = :a"
            ),
            {"a": message.attempt_id},
        )
    with pytest.raises(OperatorRefused, match="timeout"):
        await operators.check_now(engine, message.proposal_id, wait_s=0.3)
    with pytest.raises(OperatorRefused, match="not_found"):
        await operators.check_now(engine, new_id("prp"), wait_s=0.3)

    async with checker(engine, topology, operations, poll_s=0.05) as c:
        loop = asyncio.create_task(c.run())
        try:
            [state] = await operators.check_now(engine, message.proposal_id, wait_s=10)
        finally:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop

    assert state.status == "open" and state.checks >= 5
    assert state.last_result == {"result": "pending"}
    assert transfer.asked[message.attempt_id] >= 1


async def test_an_operator_resolves_a_check_once_with_their_name_and_note(
    engine: AsyncEngine, topology: Topology, operations: Operations, transfer: Any
) -> None:
    applied, failed = required(), required()
    for message in (applied, failed):
        await open_check(engine, message)

    state, outcome = await operators.resolve(
        engine,
        topology,
        operations,
        applied.proposal_id,
        verdict="succeeded",
        operator="alice",
        note="the dashboard shows it",
    )
    _, generic = await operators.resolve(
        engine,
        topology,
        operations,
        failed.proposal_id,
        verdict="failed",
        operator="bob",
        note="no",
    )
    with pytest.raises(OperatorRefused, match="already_resolved"):
        await operators.resolve(
            engine,
            topology,
            operations,
            applied.proposal_id,
            verdict="failed",
            operator="carol",
            note="changed my mind",
        )

    assert (state.status, state.resolved_by, state.operator) == ("resolved", "operator", "alice")
    assert state.note == "the dashboard shows it"
    assert outcome == Succeeded(result={"amount": 0})  # what the domain recorded
    assert transfer.verdicts == {applied.attempt_id: True, failed.attempt_id: False}
    [report] = await outbox(engine, applied.proposal_id, "execution.outcome")
    assert (report.reported_by, report.operator, report.note) == (
        "operator",
        "alice",
        "the dashboard shows it",
    )
    assert report.contract_id == applied.contract_id
    [manual] = await outbox(engine, applied.proposal_id, "execution.reconciliation_checked")
    assert (manual.result, manual.detail) == ("manual", "succeeded by alice")
    assert generic.type == "failed"  # the domain kept no record: a generic failure
    [failure] = await outbox(engine, failed.proposal_id, "execution.outcome")
    assert failure.outcome == generic and failure.operator == "bob"
    assert json.loads(json.dumps((await check_row(engine, failed.attempt_id)).last_result)) == {
        "result": "manual",
        "verdict": "failed",
    }
