"""Propose → approve → execute → outcome, through the real processes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_stack import Stack
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import SERVICES
from sqlalchemy import text

pytestmark = pytest.mark.e2e

REFUND = "order.refund_missing_discount"
DRAFT = "email_broadcast.apply_draft"


def refund_request(
    case: dict[str, str], destination: str = "original_payment_method"
) -> dict[str, Any]:
    return {
        "payment_id": case["payment_id"],
        "line_item_id": case["line_item_id"],
        "discount_id": case["discount_id"],
        "destination": destination,
    }


async def propose_refund(stack: Stack, org: dict[str, Any], token: str) -> str:
    case = org["refund_case"]
    response = await stack.propose(token, REFUND, case["order_id"], refund_request(case))
    assert response.status_code == 201, response.text
    return str(response.json()["proposal"]["id"])


def actions(view: dict[str, Any]) -> list[str]:
    return [entry["action"] for entry in view["audit"]]


async def test_a_card_refund_goes_from_proposal_to_succeeded(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]

    created = await stack.propose(token, REFUND, case["order_id"], refund_request(case))
    assert created.status_code == 201, created.text
    body = created.json()
    proposal_id = body["proposal"]["id"]
    assert body["proposal"]["status"] == "pending"
    amount = body["proposal"]["preview"]["amount_cents"]
    assert amount > 0
    assert body["rendered_preview"]["lines"], "the human view is rendered by the operation"
    assert (await stack.proposal(token, proposal_id))["status"] == "pending"  # stored before 201

    approved = await stack.approve(token, proposal_id)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"] == "claimed"

    view = await stack.settled(token, proposal_id)
    assert view["status"] == "succeeded", view
    assert view["outcome"]["result"]["amount_cents"] == amount
    assert {"created", "claimed"} <= set(actions(view)), actions(view)
    assert view["audit"][-1]["to_status"] == "succeeded"

    refunded = await stack.scalar(
        "SELECT refunded_cents FROM club.payments WHERE id = :p", p=case["payment_id"]
    )
    assert refunded == amount
    ledger = await stack.ledger()
    keys = [k for k in ledger["effects_per_key"] if proposal_id in k]
    assert [ledger["effects_per_key"][k] for k in keys] == [1]


async def test_a_broadcast_draft_goes_from_proposal_to_succeeded(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["broadcast_case"]
    request = {
        "segment_ids": case["segment_ids"],
        "subject": "Spring league",
        "body": "Sign-ups open **Monday**.",
    }

    created = await stack.propose(token, DRAFT, case["broadcast_id"], request)
    assert created.status_code == 201, created.text
    proposal_id = created.json()["proposal"]["id"]
    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"

    view = await stack.settled(token, proposal_id)
    assert view["status"] == "succeeded", view
    subject = await stack.scalar(
        "SELECT subject FROM club.broadcast_forms WHERE id = :b", b=case["broadcast_id"]
    )
    assert subject == "Spring league"
    assert view["audit"][-1]["to_status"] == "succeeded"


async def test_invalid_requests_are_refused_with_a_reason_and_store_nothing(stack: Stack) -> None:
    seeded = (await stack.seed())["organizations"]
    org, other = seeded[0], seeded[1]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    before = await stack.scalar("SELECT count(*) FROM proposals.proposals")

    extra = await stack.propose(
        token, REFUND, case["order_id"], {**refund_request(case), "amount_cents": 1}
    )
    assert extra.status_code == 422 and extra.json()["code"] == "invalid_request"
    foreign = await stack.propose(
        token,
        REFUND,
        case["order_id"],
        refund_request({**case, "payment_id": other["refund_case"]["payment_id"]}),
    )
    assert foreign.status_code == 422 and foreign.json()["code"] == "payment_not_found"
    unknown = await stack.propose(token, "order.nothing_like_this", case["order_id"], {})
    assert unknown.status_code == 404
    anonymous = await stack.propose("not-a-token", REFUND, case["order_id"], refund_request(case))
    assert anonymous.status_code == 401
    for response in (extra, foreign, unknown, anonymous):
        assert response.headers["content-type"].startswith("application/problem+json")
    assert await stack.scalar("SELECT count(*) FROM proposals.proposals") == before


async def test_a_retried_propose_with_its_idempotency_key_finds_the_first_proposal(
    stack: Stack,
) -> None:
    first, other = (await stack.seed())["organizations"][:2]
    token = stack.token(first["users"]["manager"], first)
    case = first["refund_case"]
    url = f"{stack.url('agent')}/v1/operations/{REFUND}/propose"
    body = {"resource_id": case["order_id"], "request": refund_request(case)}

    def keyed(key: str, who: str = token) -> dict[str, str]:
        return {**stack.auth(who), "Idempotency-Key": key}

    # a client that lost the answer asks again, several times at once
    answers = await asyncio.gather(
        *(stack.http.post(url, json=body, headers=keyed("retry-7f3a")) for _ in range(5))
    )
    assert {a.status_code for a in answers} == {201}, [a.text for a in answers]
    ids = {a.json()["proposal"]["id"] for a in answers}
    assert len(ids) == 1, ids
    stored = await stack.scalar(
        "SELECT count(*) FROM proposals.proposals WHERE resource_id = :r", r=case["order_id"]
    )
    assert stored == 1

    changed = {**body, "request": refund_request(case, destination="account_credit")}
    reused = await stack.http.post(url, json=changed, headers=keyed("retry-7f3a"))
    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"

    bad = await stack.http.post(url, json=body, headers=keyed("no spaces allowed"))
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"

    # keys are per person: another club's manager using the same key makes their own proposal
    theirs = other["refund_case"]
    their_token = stack.token(other["users"]["manager"], other)
    own = await stack.http.post(
        url,
        json={"resource_id": theirs["order_id"], "request": refund_request(theirs)},
        headers=keyed("retry-7f3a", their_token),
    )
    assert own.status_code == 201, own.text
    assert own.json()["proposal"]["id"] not in ids
    # without a key, a repeat is a second proposal, as before
    again = await stack.http.post(url, json=body, headers=stack.auth(token))
    assert again.status_code == 201 and again.json()["proposal"]["id"] not in ids


async def test_an_approver_downgraded_before_execution_gets_a_revision_and_no_refund(
    stack: Stack,
) -> None:
    """The executor re-checks the approver with the club's directory in its transaction: the
    manager who approved is a viewer by the time the contract runs, so nothing is refunded."""
    org = (await stack.seed())["organizations"][0]
    manager = org["users"]["manager"]
    token = stack.token(manager, org)
    proposal_id = await propose_refund(stack, org, token)
    payment = org["refund_case"]["payment_id"]
    stack.processes["executor"].stop()  # the contract waits in its queue
    try:
        approved = await stack.approve(token, proposal_id)
        assert approved.json()["result"] == "claimed", approved.text
        async with stack.engine.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE club.memberships SET role = 'viewer' "
                    "WHERE user_id = :u AND organization_id = :o"
                ),
                {"u": manager["id"], "o": org["id"]},
            )
    finally:
        stack.restart("executor")

    view = await stack.settled(token, proposal_id)
    assert view["status"] == "revision_required", view
    assert view["outcome"]["reason"]["code"] == "approver_no_longer_authorized"
    assert (
        await stack.scalar(
            "SELECT refunded_cents + reserved_cents FROM club.payments WHERE id = :p", p=payment
        )
        == 0
    )
    ledger = await stack.ledger()
    assert not [k for k in ledger["effects_per_key"] if proposal_id in k]


async def test_every_service_runs_as_its_own_database_role(stack: Stack) -> None:
    """The stack runs as deployed: each service's connections are its own role's (so the tests
    above show the lifecycle works with only the privileges ``signoff_runtime.roles`` grants)."""
    wanted = {f"signoff-{name}": f"signoff_{name}" for name in SERVICES}

    async def connected() -> dict[str, str]:
        async with stack.engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT DISTINCT application_name, usename FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name LIKE 'signoff-%'"
                )
            )
            seen = {row.application_name: row.usename for row in rows}
        return seen if set(seen) >= set(wanted) else {}

    seen = await wait_until(connected, timeout=30.0, what="every service's connections")
    assert {app: seen[app] for app in wanted} == wanted
