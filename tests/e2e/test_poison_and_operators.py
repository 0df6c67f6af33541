"""Poison messages never block good ones, and what operators do about what is left over:
``signoff dlq list|replay``, ``signoff reconcile`` (check now, resolve by hand) and
``signoff proposals stuck``, through the real processes."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aio_pika
import pytest
from e2e_stack import Stack
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ReconciliationChecked
from signoff_runtime.settings import broker_user
from signoff_runtime.testing import never, wait_until
from sqlalchemy import text
from test_lifecycle import propose_refund

pytestmark = pytest.mark.e2e
QUEUE = "proposals.reconciliation"


def _check(proposal_id: str, number: int, detail: str | None = None) -> bytes:
    return (
        ReconciliationChecked(
            proposal_id=proposal_id,
            attempt_id="att_poison_test",
            check=number,
            result="pending",
            detail=detail,
            correlation_id=proposal_id,
            source="reconciler",
        )
        .model_dump_json()
        .encode()
    )


def _id(body: bytes) -> str:
    return str(json.loads(body)["message_id"])


def _poison(proposal_id: str) -> list[tuple[str, bytes]]:
    """Seven that cannot be parsed or validated, three the database refuses on every delivery."""
    valid = json.loads(_check(proposal_id, 1))
    return [
        ("invalid_message", b"not json at all"),
        ("invalid_message", b"\xff\xfe\x00"),
        ("invalid_message", b"[]"),
        ("invalid_message", b'{"type": "execution.reconciliation_checked"'),
        ("invalid_message", json.dumps({**valid, "check": 0}).encode()),
        ("invalid_message", json.dumps({**valid, "result": "maybe"}).encode()),
        ("invalid_message", json.dumps({**valid, "proposal_id": "not-a-proposal"}).encode()),
        *[("handler_failed", _check(proposal_id, 1, detail=f"nul \x00 {n}")) for n in range(3)],
    ]


async def _publish_all(stack: Stack, bodies: list[tuple[str, bytes]]) -> None:
    connection = await aio_pika.connect(stack.amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(stack.topology.name("outcomes"))
        await asyncio.gather(
            *(
                exchange.publish(
                    aio_pika.Message(
                        body,
                        message_id=mid,
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        user_id=broker_user(stack.amqp_url),
                    ),
                    routing_key="execution.reconciliation_checked",
                )
                for mid, body in bodies
            )
        )


async def _stored(stack: Stack, message_ids: list[str]) -> int:
    return int(
        await stack.scalar(
            "SELECT count(*) FROM proposals.reconciliation_checks WHERE message_id = ANY(:ids)",
            ids=message_ids,
        )
    )


async def test_ten_poison_messages_among_a_thousand_good_ones(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    proposal_id = await propose_refund(stack, org, stack.token(org["users"]["manager"], org))
    good = [(_id(body), body) for body in (_check(proposal_id, n) for n in range(1, 1001))]
    poison = [(new_id("msg"), reason, body) for reason, body in _poison(proposal_id)]
    mixed: list[tuple[str, bytes]] = list(good)
    for i, (mid, _, body) in enumerate(poison):
        mixed.insert(37 + i * 97, (mid, body))  # spread through the stream
    started = time.monotonic()

    await _publish_all(stack, mixed)
    good_ids = [mid for mid, _ in good]
    await wait_until(
        lambda: _all(stack, good_ids, len(poison)), timeout=60, interval=0.2, what="all handled"
    )
    elapsed = time.monotonic() - started

    letters = {row["message_id"]: row for row in await stack.dead_letters(QUEUE)}
    limit = stack.topology.delivery_limit
    for mid, reason, _ in poison:
        assert letters[mid]["reason"] == reason, letters[mid]
        assert 1 <= letters[mid]["deliveries"] <= limit + 1, letters[mid]
    assert [letters[mid]["deliveries"] for mid, r, _ in poison if r == "handler_failed"] == [
        limit
    ] * 3  # retried, then dead-lettered by the consumer itself on its last delivery
    assert all(letters[mid]["detail"] for mid, _, _ in poison)
    assert await stack.queue_depth(stack.topology.name(QUEUE)) == 0
    assert await stack.queue_depth(stack.topology.dlq(QUEUE)) == 0  # archived and acked
    assert elapsed < 60
    print(f"1,000 good + 10 poison through {QUEUE}: {elapsed:.1f}s")


async def _all(stack: Stack, good_ids: list[str], poison: int) -> bool:
    stored, dead = await _stored(stack, good_ids), len(await stack.dead_letters(QUEUE))
    return stored == len(good_ids) and dead >= poison


async def _needs_reconciliation(
    stack: Stack, fault: dict[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    proposal_id = await propose_refund(stack, org, token)
    ref = await stack.scalar(
        "SELECT provider_ref FROM club.payments WHERE id = :p", p=org["refund_case"]["payment_id"]
    )
    await stack.faults([{**fault, "payment_ref": ref}])
    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    return proposal_id, token, org


async def test_a_dead_lettered_outcome_is_replayed_after_the_fix_and_processed_once(
    stack: Stack,
) -> None:
    # a broken migration: the proposals database refuses this proposal's success for a while
    proposal_id, token, _ = await _needs_reconciliation(stack, {"mode": "drop_response"})
    async with stack.engine.begin() as conn:
        await conn.execute(
            text(
                "ALTER TABLE proposals.proposals ADD CONSTRAINT e2e_broken "
                f"CHECK (status <> 'succeeded' OR id <> '{proposal_id}') NOT VALID"
            )
        )

    async def dead() -> list[dict[str, Any]]:
        return [
            row
            for row in await stack.dead_letters("proposals.outcomes")
            if row["correlation_id"] == proposal_id and row["replayed_at"] is None
        ]

    [letter] = await wait_until(dead, timeout=30, what="the outcome dead-lettered")
    assert letter["reason"] == "handler_failed"
    assert (await stack.proposal(token, proposal_id))["status"] == "needs_reconciliation"
    listed = await stack.signoff("dlq", "list", "--queue", "proposals.outcomes", "--json")
    assert listed.returncode == 0, listed.stderr
    assert letter["id"] in [row["id"] for row in json.loads(listed.stdout)]
    async with stack.engine.begin() as conn:  # the fix
        await conn.execute(text("ALTER TABLE proposals.proposals DROP CONSTRAINT e2e_broken"))

    first = await stack.signoff(
        "dlq", "replay", str(letter["id"]), "--operator", "alice", "--note", "constraint dropped"
    )
    assert first.returncode == 0, first.stderr
    view = await stack.settled(token, proposal_id)
    second = await stack.signoff("dlq", "replay", str(letter["id"]), "--operator", "bob")

    assert view["status"] == "succeeded"
    assert second.returncode == 1 and "already_replayed" in second.stderr, second
    [row] = [r for r in await stack.dead_letters("proposals.outcomes") if r["id"] == letter["id"]]
    assert (row["replayed_by"], row["replay_note"]) == ("alice", "constraint dropped")

    async def outcome_moves() -> list[dict[str, Any]]:
        audit = (await stack.proposal(token, proposal_id))["audit"]
        return [a for a in audit if a["action"] == "outcome" and a["to_status"] == "succeeded"]

    [move] = await outcome_moves()
    assert move["actor"] == "system:reconciler"

    async def second_move() -> list[dict[str, Any]]:
        moves = await outcome_moves()
        return moves if len(moves) > 1 else []

    # a second copy of the replayed outcome would show as a second move: watch for one
    await never(second_move, within=2.0, interval=0.1, what="a second outcome applied")


async def test_an_operator_resolves_a_check_the_provider_cannot_answer_once(stack: Stack) -> None:
    # the provider dies mid-refund and stays down: no lookup can conclude
    proposal_id, token, org = await _needs_reconciliation(
        stack, {"mode": "delay", "delay_ms": 8000}
    )

    async def in_flight() -> bool:
        return bool([k for k in (await stack.ledger())["in_flight"] if proposal_id in k])

    await wait_until(in_flight, what="the refund in flight")
    stack.processes["provider"].kill()
    try:
        await wait_until(
            lambda: _status(stack, token, proposal_id, "needs_reconciliation"),
            what="needs_reconciliation",
        )
        # the stack is shared: other tests' stuck proposals, older, come first (50 by default)
        stuck = await stack.signoff("proposals", "stuck", "--json", "--limit", "1000")
        assert proposal_id in [row["id"] for row in json.loads(stuck.stdout)], stuck

        asked = await stack.signoff("reconcile", proposal_id, "--json", "--wait", "20")
        assert asked.returncode == 0, asked.stderr
        [state] = json.loads(asked.stdout)
        assert state["status"] == "open" and state["checks"] >= 1

        resolved = await stack.signoff(
            "reconcile",
            proposal_id,
            "--resolve",
            "failed",
            "--note",
            "dashboard: no refund under this key",
            "--operator",
            "alice",
        )
        assert resolved.returncode == 0, resolved.stderr
        view = await stack.settled(token, proposal_id)
        again = await stack.signoff(
            "reconcile", proposal_id, "--resolve", "succeeded", "--note", "x", "--operator", "bob"
        )
    finally:
        stack.restart("provider")

    assert view["status"] == "failed" and view["outcome"]["type"] == "failed"
    assert again.returncode == 1 and "already_resolved" in again.stderr, again
    [verdict] = [a for a in view["audit"] if a["actor"].startswith("operator:")]
    assert verdict["actor"] == "operator:alice" and verdict["to_status"] == "failed"
    assert verdict["detail"]["note"] == "dashboard: no refund under this key"
    page = await stack.reconciliation(token, proposal_id)
    assert page["checks"][-1]["result"] == "manual", page
    attempt_status, reserved = (
        await stack.scalar(
            "SELECT status FROM club.refund_attempts WHERE proposal_id = :p", p=proposal_id
        ),
        await stack.scalar(
            "SELECT reserved_cents FROM club.payments WHERE id = :p",
            p=org["refund_case"]["payment_id"],
        ),
    )
    assert (attempt_status, reserved) == ("failed", 0)  # the domain released the reservation

    async def overturned() -> dict[str, Any] | None:
        final = await stack.proposal(token, proposal_id)
        verdicts = [a for a in final["audit"] if a["actor"].startswith("operator:")]
        return final if final["status"] != "failed" or len(verdicts) != 1 else None

    # a late check (or the second operator) overturning the verdict would show here
    await never(overturned, within=2.0, interval=0.1, what="the operator's verdict overturned")


async def _status(stack: Stack, token: str, proposal_id: str, status: str) -> bool:
    return bool((await stack.proposal(token, proposal_id))["status"] == status)
