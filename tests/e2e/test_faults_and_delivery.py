"""What the pipeline does when the world moves: lost responses, stale state, duplicate and
forged contracts, several executors."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from e2e_stack import Stack
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime.settings import ContractSigningSettings
from signoff_runtime.signing import sign
from signoff_runtime.testing import wait_until
from sqlalchemy import text
from test_lifecycle import DRAFT, REFUND, propose_refund

pytestmark = pytest.mark.e2e


async def test_a_lost_provider_response_is_reconciled_to_one_refund(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    proposal_id = await propose_refund(stack, org, token)
    payment_ref = await stack.scalar(
        "SELECT provider_ref FROM club.payments WHERE id = :p", p=org["refund_case"]["payment_id"]
    )
    await stack.faults([{"mode": "drop_response", "count": 1, "payment_ref": payment_ref}])

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    view = await stack.settled(token, proposal_id)

    assert view["status"] == "succeeded", view
    transitions = [entry["to_status"] for entry in view["audit"]]
    assert "needs_reconciliation" in transitions, transitions
    assert view["audit"][-1]["actor"].endswith("reconciler") or "reconciler" in json.dumps(
        view["audit"][-1]
    )
    ledger = await stack.ledger()
    keys = [k for k in ledger["effects_per_key"] if proposal_id in k]
    assert [ledger["effects_per_key"][k] for k in keys] == [1], ledger["effects_per_key"]

    async def history() -> dict[str, Any] | None:  # the checks travel beside the outcome
        page = await stack.reconciliation(token, proposal_id)
        return page if page["checks"] and page["checks"][-1]["result"] == "applied" else None

    page = await wait_until(history, what="the check history on the status page")
    assert view["outcome"]["type"] == "succeeded" and page["status"] == "succeeded"
    assert page["state"] == "resolved"
    assert [c["check"] for c in page["checks"]] == list(range(1, len(page["checks"]) + 1))
    assert {c["attempt_id"] for c in page["checks"]} == {page["attempt"]["attempt_id"]}
    assert all(c["result"] in ("pending", "error") for c in page["checks"][:-1]), page


async def test_a_discount_applied_elsewhere_requires_revision_and_executes_nothing(
    stack: Stack,
) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    proposal_id = await propose_refund(stack, org, token)
    async with stack.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE club.line_item_discounts SET applied = true "
                "WHERE line_item_id = :l AND discount_id = :d"
            ),
            {"l": case["line_item_id"], "d": case["discount_id"]},
        )

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    view = await stack.settled(token, proposal_id)

    assert view["status"] == "revision_required", view
    assert view["outcome"]["reason"]["code"] == "discount_already_applied"
    assert (
        await stack.scalar(
            "SELECT count(*) FROM club.refunds WHERE proposal_id = :p", p=proposal_id
        )
        == 0
    )
    assert not [k for k in (await stack.ledger())["effects_per_key"] if proposal_id in k]


async def test_a_changed_audience_requires_revision(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["broadcast_case"]
    created = await stack.propose(
        token,
        DRAFT,
        case["broadcast_id"],
        {"segment_ids": case["segment_ids"], "subject": "Hello", "body": "News."},
    )
    proposal_id = created.json()["proposal"]["id"]
    newcomer = new_id("par")
    async with stack.engine.begin() as conn:  # a new participant joins: the audience grows
        await conn.execute(
            text("INSERT INTO club.participants (id, organization_id, name) VALUES (:p, :o, :n)"),
            {"p": newcomer, "o": org["id"], "n": "New Member"},
        )
        await conn.execute(
            text("INSERT INTO club.segment_members (segment_id, participant_id) VALUES (:s, :p)"),
            {"s": case["segment_ids"][0], "p": newcomer},
        )

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    view = await stack.settled(token, proposal_id)

    assert view["status"] == "revision_required", view
    assert view["outcome"]["reason"]["code"] == "audience_changed"
    assert (
        await stack.scalar(
            "SELECT applied_proposal_id FROM club.broadcast_forms WHERE id = :b",
            b=case["broadcast_id"],
        )
        is None
    )


async def _claimed_contract(stack: Stack, proposal_id: str) -> bytes:
    body = await stack.scalar(
        "SELECT body FROM proposals.outbox WHERE correlation_id = :p "
        "AND message_type = 'execution.contract' ORDER BY id LIMIT 1",
        p=proposal_id,
    )
    return bytes(body)


async def test_one_contract_delivered_five_times_executes_once(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    proposal_id = await propose_refund(stack, org, token)
    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    body = await _claimed_contract(stack, proposal_id)
    for _ in range(4):
        await stack.publish(
            "contracts",
            "execution.contract",
            body,
            message_id=new_id("msg"),
            content_type="application/json",
        )

    view = await stack.settled(token, proposal_id)
    assert view["status"] == "succeeded"
    contract_id = json.loads(body)["contract_id"]

    async def all_consumed() -> bool:
        depth = await stack.queue_depth(stack.topology.name("executor.contracts"))
        return depth == 0

    await wait_until(all_consumed, what="every copy consumed")
    assert (
        await stack.scalar(
            "SELECT count(*) FROM club.refunds WHERE proposal_id = :p", p=proposal_id
        )
        == 1
    )
    assert (
        await stack.scalar(
            "SELECT count(*) FROM executor.executions WHERE contract_id = :c", c=contract_id
        )
        == 1
    )
    ledger = await stack.ledger()
    assert [
        ledger["effects_per_key"][k] for k in ledger["effects_per_key"] if proposal_id in k
    ] == [1]


def _contract(org: dict[str, Any], proposal_id: str, **changes: Any) -> ExecutionContract:
    case = org["refund_case"]
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "contract_id": new_id("ctr"),
        "proposal_id": proposal_id,
        "organization_id": org["id"],
        "section": "orders",
        "resource_id": case["order_id"],
        "operation_kind": REFUND,
        "contract_version": 1,
        "arguments": {
            "order_id": case["order_id"],
            "payment_id": case["payment_id"],
            "line_item_id": case["line_item_id"],
            "discount_id": case["discount_id"],
            "amount_cents": 1,
            "currency": "cad",
            "destination": "account_credit",
            "payment_ref": None,
        },
        "approved_by": org["users"]["manager"]["id"],
        "approved_at": now,
        "execute_by": now + timedelta(minutes=5),
    }
    fields.update(changes)
    return ExecutionContract(**fields)


async def test_forged_unknown_and_late_contracts_never_execute(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    key = ContractSigningSettings()
    dead_before = await _dead(stack, "executor.contracts")
    forged = _contract(org, new_id("prp"), signature="0" * 64)
    tampered = sign(_contract(org, new_id("prp")), key).model_copy(
        update={"arguments": {**_contract(org, "prp_x").arguments, "amount_cents": 99_999}}
    )
    unknown = sign(_contract(org, new_id("prp"), contract_version=99), key)
    late = sign(
        _contract(org, new_id("prp"), execute_by=datetime.now(UTC) - timedelta(seconds=1)), key
    )
    for contract in (forged, tampered, unknown, late):
        await stack.publish(
            "contracts",
            "execution.contract",
            contract.model_dump_json().encode(),
            message_id=contract.message_id,
        )

    async def three_dead() -> bool:
        return await _dead(stack, "executor.contracts") >= dead_before + 3

    await wait_until(three_dead, what="three dead letters")
    late_row = await wait_until(
        lambda: _execution(stack, late.contract_id), what="the late contract's outcome"
    )
    assert late_row["outcome"]["reason"]["code"] == "approval_stale"
    for contract in (forged, tampered, unknown):
        assert await _execution(stack, contract.contract_id) is None
    assert (
        await stack.scalar(
            "SELECT count(*) FROM club.refunds r JOIN club.payments p "
            "ON p.id = r.payment_id WHERE p.id = :p",
            p=org["refund_case"]["payment_id"],
        )
        == 0
    )


async def _dead(stack: Stack, queue: str) -> int:
    """Dead letters of ``queue`` still in its DLQ plus those the reconciler archived (and acked)."""
    archived = await stack.dead_letters(queue)
    return await stack.queue_depth(stack.topology.dlq(queue)) + len(archived)


async def _execution(stack: Stack, contract_id: str) -> dict[str, Any] | None:
    async with stack.engine.connect() as conn:
        row = (
            (
                await conn.execute(
                    text("SELECT status, outcome FROM executor.executions WHERE contract_id = :c"),
                    {"c": contract_id},
                )
            )
            .mappings()
            .first()
        )
    return dict(row) if row and row["status"] == "done" else None


async def test_two_executors_execute_every_contract_exactly_once(stack: Stack) -> None:
    stack.start_extra("executor", "executor-2")
    orgs = []
    for _ in range(6):
        orgs += (await stack.seed())["organizations"]
    tokens = [stack.token(org["users"]["manager"], org) for org in orgs]
    proposals = [
        await propose_refund(stack, org, tok) for org, tok in zip(orgs, tokens, strict=True)
    ]
    replies = await asyncio.gather(
        *(stack.approve(t, p) for t, p in zip(tokens, proposals, strict=True))
    )
    assert all(r.json()["result"] == "claimed" for r in replies)
    views = [await stack.settled(t, p) for t, p in zip(tokens, proposals, strict=True)]

    assert [v["status"] for v in views] == ["succeeded"] * len(proposals)
    ledger = await stack.ledger()
    for proposal_id in proposals:
        assert [
            ledger["effects_per_key"][k] for k in ledger["effects_per_key"] if proposal_id in k
        ] == [1]
        assert (
            await stack.scalar(
                "SELECT count(*) FROM club.refunds WHERE proposal_id = :p", p=proposal_id
            )
            == 1
        )
    by_executor = await _work_per_executor(stack)
    assert len(by_executor) == 2 and min(by_executor.values()) > 0, by_executor


async def _work_per_executor(stack: Stack) -> dict[str, float]:
    """Outcomes each executor stored, from its own /metrics."""
    counts = {}
    for name in ("executor", "executor-2"):
        metrics = (await stack.http.get(f"{stack.url(name)}/metrics")).text
        counts[name] = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("signoff_executor_outcomes_total{")
        )
    return counts
