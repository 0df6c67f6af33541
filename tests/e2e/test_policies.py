"""Approval policies through the real processes: a threshold refund needs two managers (and not
its proposer), a small one does not; racing approvals of three managers run it exactly once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_stack import Stack
from policies_kit import OVER_100, REFUND, add_manager, make_refund_150, set_policy
from test_lifecycle import propose_refund

pytestmark = pytest.mark.e2e


def _effects(ledger: dict[str, Any], proposal_id: str) -> list[int]:
    return [n for key, n in ledger["effects_per_key"].items() if proposal_id in key]


async def test_a_threshold_refund_needs_two_managers_and_a_small_one_does_not(
    stack: Stack,
) -> None:
    big_org, small_org = (await stack.seed())["organizations"]
    morgan = stack.token(big_org["users"]["manager"], big_org)
    for org in (big_org, small_org):
        saved = await set_policy(stack, stack.token(org["users"]["manager"], org), [OVER_100])
        assert saved["version"] == 1 and saved["facts"] == {"amount_cents": "int"}
    await make_refund_150(stack, big_org)
    sam_user = await add_manager(stack, big_org, "Sam Roy")
    alex_user = await add_manager(stack, big_org, "Alex Martin")
    sam, alex = stack.token(sam_user, big_org), stack.token(alex_user, big_org)

    big = await propose_refund(stack, big_org, morgan)
    view = await stack.proposal(morgan, big)
    assert view["preview"]["amount_cents"] == 15_000
    assert view["requirement"]["required"] == 2 and view["requirement"]["policy_version"] == 1

    own = await stack.approve(morgan, big)  # the proposer, under approver ≠ proposer
    assert own.status_code == 403 and own.json()["reason"]["code"] == "proposer_may_not_approve"
    first = await stack.approve(sam, big)
    assert first.json()["result"] == "approval_recorded", first.text
    assert first.json()["approvals"] == {"recorded": 1, "required": 2}
    again = await stack.approve(sam, big)  # the same manager twice: still waiting
    assert again.json()["approvals"] == {"recorded": 1, "required": 2}
    assert (await stack.proposal(morgan, big))["status"] == "pending"
    second = await stack.approve(alex, big)
    assert second.json()["result"] == "claimed", second.text

    settled = await stack.settled(morgan, big)
    assert settled["status"] == "succeeded", settled
    assert [a["user_id"] for a in settled["approvals"]] == [sam_user["id"], alex_user["id"]]
    assert _effects(await stack.ledger(), big) == [1]

    small_token = stack.token(small_org["users"]["manager"], small_org)
    small = await propose_refund(stack, small_org, small_token)
    assert (await stack.proposal(small_token, small))["preview"]["amount_cents"] == 3_500
    alone = await stack.approve(small_token, small)  # below the threshold: the default
    assert alone.json()["result"] == "claimed", alone.text
    assert (await stack.settled(small_token, small))["status"] == "succeeded"


async def test_fifty_racing_approvals_of_three_managers_run_it_exactly_once(
    stack: Stack,
) -> None:
    org = (await stack.seed())["organizations"][0]
    morgan = stack.token(org["users"]["manager"], org)
    await set_policy(stack, morgan, [{"approvals": 2, "roles": ["manager"]}])
    others = [await add_manager(stack, org, name) for name in ("Sam Roy", "Alex Martin")]
    managers = [morgan] + [stack.token(user, org) for user in others]
    proposal_id = await propose_refund(stack, org, morgan)

    replies = await asyncio.gather(
        *(stack.approve(managers[i % 3], proposal_id) for i in range(50))
    )

    results = [r.json().get("result") or r.json().get("code") for r in replies]
    assert results.count("claimed") == 1, results
    assert set(results) <= {"claimed", "approval_recorded", "not_approvable", "already_completed"}
    view = await stack.settled(morgan, proposal_id)
    assert view["status"] == "succeeded", view
    counted = [a["user_id"] for a in view["approvals"]]
    assert len(counted) == 2 and len(set(counted)) == 2
    assert [e["actor"] for e in view["audit"] if e["action"] == "approved"] == counted
    [claim] = [e for e in view["audit"] if e["action"] == "claimed"]
    assert claim["detail"]["approvers"] == counted
    contracts = await stack.scalar(
        "SELECT count(*) FROM proposals.outbox WHERE correlation_id = :p "
        "AND message_type = 'execution.contract'",
        p=proposal_id,
    )
    executions = await stack.scalar(
        "SELECT count(*) FROM executor.executions WHERE proposal_id = :p", p=proposal_id
    )
    assert (contracts, executions) == (1, 1)
    assert _effects(await stack.ledger(), proposal_id) == [1]


async def test_a_policy_naming_a_fact_the_refund_does_not_declare_is_refused(
    stack: Stack,
) -> None:
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    response = await stack.http.put(
        f"{stack.url('proposals')}/v1/policies/{REFUND}",
        json={"rules": [{"when": {"fact": "audience_count", "op": ">", "value": 500}}]},
        headers=stack.auth(token),
    )
    assert response.status_code == 422 and response.json()["code"] == "invalid_policy"
    listed = await stack.signoff("policies", "list", "--org", org["id"], "--json")
    assert listed.returncode == 0, listed.stderr
    assert REFUND in listed.stdout
