"""The application makes the contract — in the proposals service — through the real processes.

For both club operations and for a revision: the preview a person is shown and the arguments
that run are the stored pair of ONE ``resolve`` in the proposals service (the agent sends the
request and the person's token only); the pair is exactly what the operation resolves for that
request and scope; the signed contract carries those arguments; and the effect in the domain is
the one the preview promised. A v1 request carrying the agent's own contract is dead-lettered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_stack import Stack
from signoff_contracts.ids import new_id
from signoff_runtime.testing import wait_until
from sqlalchemy import text

pytestmark = pytest.mark.e2e

REFUND = "order.refund_missing_discount"
DRAFT = "email_broadcast.apply_draft"


async def stored(stack: Stack, proposal_id: str) -> Any:
    async with stack.engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM proposals.proposals WHERE id = :i"), {"i": proposal_id}
            )
        ).first()


async def signed_arguments(stack: Stack, proposal_id: str) -> dict[str, Any]:
    async with stack.engine.connect() as conn:
        body = (
            await conn.execute(
                text(
                    "SELECT body FROM proposals.outbox WHERE correlation_id = :i "
                    "AND message_type = 'execution.contract' ORDER BY id LIMIT 1"
                ),
                {"i": proposal_id},
            )
        ).scalar_one()
    return dict(json.loads(bytes(body))["arguments"])


async def approved_and_settled(stack: Stack, token: str, proposal_id: str) -> dict[str, Any]:
    claimed = await stack.approve(token, proposal_id)
    assert claimed.status_code == 200 and claimed.json()["result"] == "claimed", claimed.text
    view = await stack.settled(token, proposal_id)
    assert view["status"] == "succeeded", view
    return view


def refund_request(case: dict[str, str], destination: str) -> dict[str, Any]:
    keys = ("payment_id", "line_item_id", "discount_id")
    return {**{k: case[k] for k in keys}, "destination": destination}


async def test_a_refund_shows_and_runs_the_pair_the_proposals_service_resolved(stack: Stack):
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    request = refund_request(case, "original_payment_method")

    created = await stack.propose(token, REFUND, case["order_id"], request)
    assert created.status_code == 201, created.text
    pid = created.json()["proposal"]["id"]
    row = await stored(stack, pid)
    expected = await stack.resolved(REFUND, org["id"], case["order_id"], request)
    assert (row.arguments, row.preview) == expected
    assert created.json()["proposal"]["preview"] == row.preview  # what the person is shown
    assert row.requested_by == org["users"]["manager"]["id"] and row.organization_id == org["id"]
    for fact in ("amount_cents", "currency", "destination"):
        assert row.arguments[fact] == row.preview[fact], fact

    await approved_and_settled(stack, token, pid)
    assert await signed_arguments(stack, pid) == row.arguments
    refunded = await stack.scalar(
        "SELECT refunded_cents FROM club.payments WHERE id = :p", p=case["payment_id"]
    )
    assert refunded == row.preview["amount_cents"]


async def test_a_broadcast_draft_shows_and_runs_the_pair_the_proposals_service_resolved(
    stack: Stack,
):
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["broadcast_case"]
    request = {"segment_ids": case["segment_ids"], "subject": "Spring", "body": "Hello **all**."}

    created = await stack.propose(token, DRAFT, case["broadcast_id"], request)
    assert created.status_code == 201, created.text
    pid = created.json()["proposal"]["id"]
    row = await stored(stack, pid)
    assert (row.arguments, row.preview) == await stack.resolved(
        DRAFT, org["id"], case["broadcast_id"], request
    )
    for fact in ("subject", "body", "audience_count"):
        assert row.arguments[fact] == row.preview[fact], fact

    await approved_and_settled(stack, token, pid)
    assert await signed_arguments(stack, pid) == row.arguments
    subject = await stack.scalar(
        "SELECT subject FROM club.broadcast_forms WHERE id = :b", b=case["broadcast_id"]
    )
    assert subject == row.preview["subject"]


async def test_a_revision_is_resolved_by_the_proposals_service_and_runs_what_it_shows(
    stack: Stack,
):
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    created = await stack.propose(
        token, REFUND, case["order_id"], refund_request(case, "original_payment_method")
    )
    old = created.json()["proposal"]["id"]
    edited = refund_request(case, "account_credit")

    revised = await stack.http.post(
        f"{stack.url('proposals')}/v1/proposals/{old}/revise",
        json={"request": edited},
        headers=stack.auth(token),
    )
    assert revised.status_code == 200, revised.text
    new = revised.json()["proposal"]["id"]
    row = await stored(stack, new)
    assert (row.arguments, row.preview) == await stack.resolved(
        REFUND, org["id"], case["order_id"], edited
    )
    assert row.arguments["destination"] == row.preview["destination"] == "account_credit"
    assert revised.json()["proposal"]["preview"] == row.preview

    await approved_and_settled(stack, token, new)
    assert await signed_arguments(stack, new) == row.arguments
    assert (await stored(stack, old)).status == "superseded"


async def test_a_v1_request_with_the_agents_own_contract_is_dead_lettered(stack: Stack):
    org = (await stack.seed())["organizations"][0]
    case = org["refund_case"]
    pid = new_id("prp")
    request = refund_request(case, "account_credit")
    forged = {
        "type": "proposal.requested",
        "version": 1,
        "proposal_id": pid,
        "organization_id": org["id"],
        "requested_by": org["users"]["viewer"]["id"],
        "section": "orders",
        "resource_id": case["order_id"],
        "operation_kind": REFUND,
        "contract_version": 1,
        "request": request,
        "arguments": {"amount_cents": 999_999},
        "preview": {"amount_cents": 100},
    }
    message_id = new_id("msg")
    await stack.publish(
        "commands", "proposal.requested", json.dumps(forged).encode(), message_id=message_id
    )

    async def dead() -> list[dict[str, Any]] | None:
        letters = await stack.dead_letters("proposals.requests")
        return [d for d in letters if d["message_id"] == message_id] or None

    [letter] = await wait_until(dead, what="the v1 request's dead letter")
    assert letter["reason"] == "unsupported_version"
    assert await stored(stack, pid) is None
