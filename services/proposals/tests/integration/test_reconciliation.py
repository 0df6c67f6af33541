"""The reconciliation status page and the operator's side of the proposals service: checks stored
once and shown to their own organization only, operator outcomes audited and applied once,
``signoff proposals stuck`` (escalated checks audited and listed first), and a typed rejection
for a command whose handling keeps failing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
from proposals_testkit import KIND, Harness, drain_queue, forget_unsent_outbox
from signoff_conformance.toy.directory import ToyDirectory
from signoff_conformance.toy.domain import GrantCredit
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import NeedsReconciliation, Succeeded, TerminalFailure
from signoff_contracts.v1 import ApproveProposal, OutcomeReported, ReconciliationChecked
from signoff_proposals.app import create_app
from signoff_runtime.registry import Operations
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def _needs_reconciliation(service: Harness) -> tuple[str, str, str, str]:
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    assert (await service.approve_http(pid, token)).status_code == 200
    contract_id = (await service.row(pid)).contract_id
    path = f"/v1/proposals/{pid}/reconciliation"
    await service.report(_report(pid, contract_id, NeedsReconciliation(status_path=path)))
    await _status(service, pid, "needs_reconciliation")
    return pid, contract_id, token, org


def _report(pid: str, contract_id: str, outcome: Any, **kw: Any) -> OutcomeReported:
    return OutcomeReported(
        proposal_id=pid,
        contract_id=contract_id,
        operation_kind=KIND,
        outcome=outcome,
        correlation_id=pid,
        **kw,
    )


def _checked(pid: str, number: int, result: str, **kw: Any) -> ReconciliationChecked:
    return ReconciliationChecked(
        proposal_id=pid,
        attempt_id="att_1",
        check=number,
        result=result,
        correlation_id=pid,
        source="reconciler",
        **kw,
    )


async def _publish_check(service: Harness, message: ReconciliationChecked) -> None:
    await service.broker.publish(
        message.model_dump_json().encode(),
        exchange=service.topology.name("outcomes"),
        routing_key=ROUTING_KEYS["proposals.reconciliation"],
        persist=True,
        message_id=message.message_id,
        user_id=service.user_id,
    )


async def _status(service: Harness, pid: str, status: str) -> None:
    async def probe() -> bool:
        return (await service.row(pid)).status == status

    await wait_until(probe, what=f"{pid} {status}")


async def _stored_checks(service: Harness, pid: str) -> int:
    async with service.engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM proposals.reconciliation_checks "
                        "WHERE proposal_id = :p"
                    ),
                    {"p": pid},
                )
            ).scalar_one()
        )


async def test_checks_are_stored_once_and_shown_to_their_organization_only(
    service: Harness,
) -> None:
    pid, _, token, _ = await _needs_reconciliation(service)
    later = datetime.now(UTC) + timedelta(seconds=4)
    first = _checked(pid, 1, "pending", next_check_at=later)
    for message in (first, first, _checked(pid, 2, "error", detail="ProviderUnavailable")):
        await _publish_check(service, message)  # the second is a redelivered copy
    # the queue's one consumer takes deliveries in order: once the last is stored, the copy
    # published before it was handled too (stored twice, it would be a third row now)
    await wait_until(lambda: _check_stored(service, pid, 2), what="the last check stored")
    assert await _stored_checks(service, pid) == 2

    path = f"/v1/proposals/{pid}/reconciliation"
    page = (await service.http.get(path, headers={"Authorization": f"Bearer {token}"})).json()
    assert [(c["check"], c["result"]) for c in page["checks"]] == [(1, "pending"), (2, "error")]
    assert page["checks"][1]["detail"] == "ProviderUnavailable"
    assert page["state"] == "checking" and page["attempt"]["attempt_id"] == "att_1"
    assert page["attempt"]["checks"] == 2 and page["attempt"]["last_result"] == "error"

    stranger = await service.approver(new_id("org"))
    hidden = await service.http.get(path, headers={"Authorization": f"Bearer {stranger}"})
    assert hidden.status_code == 404 and hidden.json()["code"] == "not_found"
    assert (await service.http.get(path)).status_code == 401


async def _check_stored(service: Harness, pid: str, number: int) -> bool:
    async with service.engine.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT 1 FROM proposals.reconciliation_checks "
                "WHERE proposal_id = :p AND check_number = :n"
            ),
            {"p": pid, "n": number},
        )
        return found.first() is not None


async def _has(service: Harness, pid: str, count: int) -> bool:
    return await _stored_checks(service, pid) >= count


async def test_a_check_of_an_unknown_proposal_is_dead_lettered(
    service: Harness, amqp_url: str
) -> None:
    stray = _checked(new_id("prp"), 1, "pending")
    await _publish_check(service, stray)
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.reconciliation"))
    assert dead.headers["x-signoff-reason"] == "unknown_proposal"
    assert dead.message_id == stray.message_id


async def test_an_operator_resolution_is_audited_and_moves_the_proposal_once(
    service: Harness,
) -> None:
    pid, contract_id, _, _ = await _needs_reconciliation(service)
    verdict = _report(
        pid,
        contract_id,
        Succeeded(result={}),
        reported_by="operator",
        operator="alice",
        note="the dashboard shows re_123",
    )
    await service.report(verdict)
    await _status(service, pid, "succeeded")
    second = _report(
        pid,
        contract_id,
        TerminalFailure(correlation_id="cor_x"),
        reported_by="operator",
        operator="bob",
        note="no, it failed",
    )
    await service.report(second)

    async def both_audited() -> list[Any]:
        trail = await service.audit(pid)
        return [a for a in trail if a.actor.startswith("operator:")] if len(trail) > 4 else []

    operator_rows = await wait_until(both_audited, what="both operator reports audited")
    assert [(a.actor, a.action, a.to_status) for a in operator_rows] == [
        ("operator:alice", "outcome", "succeeded"),
        ("operator:bob", "operator_outcome_ignored", None),
    ]
    assert operator_rows[0].detail["note"] == "the dashboard shows re_123"
    assert operator_rows[1].detail["note"] == "no, it failed"
    row = await service.row(pid)
    assert row.status == "succeeded" and row.outcome == {"type": "succeeded", "result": {}}


async def test_stuck_lists_in_progress_proposals_oldest_first_with_their_last_check(
    service: Harness, database_url: str
) -> None:
    older, _, _, _ = await _needs_reconciliation(service)
    await service.set(older, "decided_at = now() - interval '3 hours'")
    await _publish_check(service, _checked(older, 1, "pending"))
    await wait_until(lambda: _has(service, older, 1), what="the check")
    newer, _, _, _ = await _needs_reconciliation(service)

    listed = [row for row in await _stuck(database_url) if row["id"] in (older, newer)]
    assert [row["id"] for row in listed] == [older, newer]
    assert listed[0]["result"] == "pending" and listed[0]["check_number"] == 1
    assert listed[0]["age_s"] >= 3 * 3600 and listed[1]["check_number"] is None
    assert listed[0]["escalated_at"] is None


async def test_an_escalated_check_is_audited_once_listed_first_and_concluded_by_an_operator(
    service: Harness, database_url: str
) -> None:
    older, _, _, _ = await _needs_reconciliation(service)
    await service.set(older, "decided_at = now() - interval '5 hours'")
    pid, contract_id, token, _ = await _needs_reconciliation(service)
    # one check after the other, as the reconciler makes them (the page lists them as stored)
    await _publish_check(service, _checked(pid, 1, "pending"))
    await wait_until(lambda: _has(service, pid, 1), what="the first check stored")
    later = datetime.now(UTC) + timedelta(hours=1)
    escalation = _checked(
        pid, 2, "pending", escalated=True, detail="escalated after 86400s", next_check_at=later
    )
    for message in (escalation, escalation):  # the second is a redelivered copy
        await _publish_check(service, message)
    await wait_until(lambda: _has(service, pid, 2), what="the escalation stored")
    await _publish_check(service, _checked(pid, 3, "error", detail="ProviderUnavailable"))
    await wait_until(lambda: _has(service, pid, 3), what="three checks stored")

    trail = await service.audit(pid)
    [escalated] = [a for a in trail if a.action == "escalated"]
    assert escalated.actor == "system:reconciler" and escalated.to_status is None
    assert escalated.detail["check"] == 2 and escalated.detail["attempt_id"] == "att_1"
    assert (await service.row(pid)).status == "needs_reconciliation"  # not failed by a clock
    path = f"/v1/proposals/{pid}/reconciliation"
    page = (await service.http.get(path, headers={"Authorization": f"Bearer {token}"})).json()
    assert page["state"] == "checking" and page["attempt"]["escalated"] is True
    assert [c["escalated"] for c in page["checks"]] == [False, True, False]

    listed = [row for row in await _stuck(database_url) if row["id"] in (older, pid)]
    assert [row["id"] for row in listed] == [pid, older]  # escalated first, though younger
    assert listed[0]["escalated_at"] is not None and listed[1]["escalated_at"] is None

    verdict = _report(
        pid,
        contract_id,
        Succeeded(result={}),
        reported_by="operator",
        operator="alice",
        note="the provider's dashboard shows it",
    )
    await service.report(verdict)
    await _status(service, pid, "succeeded")
    actions = [(a.actor, a.action) for a in await service.audit(pid)]
    assert ("operator:alice", "outcome") in actions
    assert not any(action == "operator_outcome_ignored" for _, action in actions)
    assert [action for _, action in actions].count("escalated") == 1


async def _stuck(database_url: str) -> list[dict[str, Any]]:
    """``signoff proposals stuck --json``, as an operator runs it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from signoff_cli.main import main; main()",
        "proposals",
        "stuck",
        "--json",
        "--limit",
        "1000",
        env={**os.environ, "SIGNOFF_DB__URL": database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


class _Broken(GrantCredit):
    """Approving it always raises: the command can never be handled."""

    def authorize(self, actor: Any, scope: Any) -> bool:
        raise RuntimeError("the directory is broken")

    def may_propose(self, actor: Any, scope: Any) -> bool:
        return True  # proposing works: only the approval breaks


@pytest_asyncio.fixture(loop_scope="session")
async def broken_service(
    settings: Any, engine: Any, toy_schema: None, amqp: Any, topology: Any
) -> AsyncIterator[Harness]:
    await forget_unsent_outbox(engine)
    app = create_app(settings, Operations([_Broken()]), ToyDirectory())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            yield Harness(engine, amqp, topology, http, settings.auth)


async def test_a_command_that_keeps_failing_gets_a_typed_rejection_and_is_dead_lettered(
    broken_service: Harness, amqp_url: str
) -> None:
    service = broken_service
    org = new_id("org")
    pid = await service.pending(org)
    command = ApproveProposal(token=await service.approver(org), proposal_id=pid)

    reply = await service.command(command)

    assert (reply.result, reply.http_status) == ("invalid", 500)
    assert reply.reason is not None and reply.reason.code == "handler_failed"
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.approvals"))
    assert dead.headers["x-signoff-reason"] == "handler_failed"
    assert dead.headers["x-signoff-deliveries"] == service.topology.delivery_limit
    assert (await service.row(pid)).status == "pending"
