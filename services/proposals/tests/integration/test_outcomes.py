"""Outcomes: recorded once, by one conditional move; duplicates and late reports change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from proposals_testkit import KIND, drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import NeedsReconciliation, Succeeded, TerminalFailure
from signoff_contracts.v1 import OutcomeReported
from signoff_proposals.metrics import OUTCOMES_IGNORED
from signoff_runtime.testing import wait_until
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def _claimed(service) -> tuple[str, str, str]:
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    assert (await service.approve_http(pid, token)).status_code == 200
    return pid, (await service.row(pid)).contract_id, token


def _report(pid: str, contract_id: str, outcome, **kw) -> OutcomeReported:
    return OutcomeReported(
        proposal_id=pid,
        contract_id=contract_id,
        operation_kind=KIND,
        outcome=outcome,
        correlation_id=pid,
        **kw,
    )


async def _status(service, pid: str, status: str) -> None:
    async def probe() -> bool:
        return (await service.row(pid)).status == status

    await wait_until(probe, what=f"{pid} {status}")


async def _state(service, pid: str) -> tuple[Any, ...]:
    """The proposal, its audit trail and which messages it caused (not whether sent yet)."""
    outbox = [(r.id, r.message_id) for r in await service.outbox(pid)]
    return await service.row(pid), await service.audit(pid), outbox


async def _in_inbox(service, message_id: str) -> None:
    async def probe() -> bool:
        async with service.engine.connect() as conn:
            return (
                await conn.execute(
                    text("SELECT 1 FROM proposals.inbox WHERE message_id = :m"), {"m": message_id}
                )
            ).first() is not None

    await wait_until(probe, what=f"inbox {message_id}")


async def test_an_outcome_finishes_the_proposal_and_approving_again_returns_it(service):
    pid, contract_id, token = await _claimed(service)
    outcome = Succeeded(result={"balance": 5})

    await service.report(_report(pid, contract_id, outcome))
    await _status(service, pid, "succeeded")

    row = await service.row(pid)
    assert row.outcome == outcome.model_dump(mode="json") and row.outcome_at is not None
    [recorded] = [a for a in await service.audit(pid) if a.action == "outcome"]
    assert (recorded.actor, recorded.from_status, recorded.to_status) == (
        "system:executor",
        "executing",
        "succeeded",
    )
    assert [r.routing_key for r in await service.outbox(pid, "proposal.event")][-1] == (
        "proposal.outcome"
    )
    http = await service.approve_http(pid, token)
    amqp = await service.approve_amqp(pid, token)
    assert http.status_code == 200 and http.json()["result"] == "already_completed"
    assert http.json()["outcome"] == outcome.model_dump(mode="json")
    assert (amqp.result, amqp.outcome) == ("already_completed", outcome)
    assert len(await service.contracts(pid)) == 1


async def test_duplicate_and_late_outcomes_change_nothing(service):
    pid, contract_id, _ = await _claimed(service)
    first = _report(pid, contract_id, Succeeded(result={"balance": 5}))
    await service.report(first)
    await _status(service, pid, "succeeded")
    before = await _state(service, pid)
    duplicates = OUTCOMES_IGNORED.labels(why="duplicate")._value.get()

    await service.report(first)  # redelivered: same message id
    late = _report(pid, contract_id, TerminalFailure(correlation_id="cor_x"))
    await service.report(late)  # a different report for a finished proposal
    stray = _report(pid, "ctr_01notthisone", TerminalFailure(correlation_id="cor_y"))
    await service.report(stray)

    async def duplicate_seen() -> bool:
        return OUTCOMES_IGNORED.labels(why="duplicate")._value.get() > duplicates

    await wait_until(duplicate_seen, what="the duplicate to be dropped")
    await _in_inbox(service, late.message_id)
    await _in_inbox(service, stray.message_id)
    after = await _state(service, pid)
    assert after == before


async def test_needs_reconciliation_then_resolved(service):
    pid, contract_id, token = await _claimed(service)
    path = f"/v1/proposals/{pid}/reconciliation"

    await service.report(_report(pid, contract_id, NeedsReconciliation(status_path=path)))
    await _status(service, pid, "needs_reconciliation")
    headers = {"Authorization": f"Bearer {token}"}
    shown = (await service.http.get(path, headers=headers)).json()
    assert {key: shown[key] for key in ("proposal_id", "status", "outcome")} == {
        "proposal_id": pid,
        "status": "needs_reconciliation",
        "outcome": {"type": "needs_reconciliation", "status_path": path},
    }
    assert (shown["state"], shown["checks"]) == ("awaiting_first_check", [])

    await service.report(
        _report(pid, contract_id, Succeeded(result={"balance": 1}), reported_by="reconciler")
    )
    await _status(service, pid, "succeeded")
    moves = [
        (a.from_status, a.to_status) for a in await service.audit(pid) if a.action == "outcome"
    ]
    assert moves == [("executing", "needs_reconciliation"), ("needs_reconciliation", "succeeded")]


async def test_an_outcome_for_an_unknown_proposal_is_dead_lettered(service, amqp_url):
    report = _report(new_id("prp"), "ctr_01abc", Succeeded(result={}))
    await service.report(report)
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.outcomes"))
    assert dead.headers["x-signoff-reason"] == "unknown_proposal"
    assert dead.message_id == report.message_id
