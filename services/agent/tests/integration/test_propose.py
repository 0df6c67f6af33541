"""The machine-facing propose endpoint answers the proposals service's refusals as before.

The agent no longer resolves: a refusal comes back typed from the proposals service, and each
kind keeps its HTTP meaning — the operation's own reason code ``422``, a quota ``422``, a role
that may not propose ``403``, the person's proposal rate ``429`` with ``Retry-After``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agent_testkit import FakeProposals, auth
from signoff_contracts.reasons import Reason

pytestmark = pytest.mark.integration
REFUND = "order.refund_missing_discount"


def _body(club: dict[str, Any], **changes: str) -> dict[str, Any]:
    case = {**club["refund_case"], **changes}
    keys = ("payment_id", "line_item_id", "discount_id")
    return {
        "resource_id": case["order_id"],
        "request": {**{k: case[k] for k in keys}, "destination": "original_payment_method"},
    }


async def _propose(agent: httpx.AsyncClient, club: dict[str, Any], **changes: str) -> Any:
    return await agent.post(
        f"/v1/operations/{REFUND}/propose", json=_body(club, **changes), headers=auth(club)
    )


async def test_a_stored_proposal_is_201_with_the_preview_the_proposals_service_resolved(
    agent: httpx.AsyncClient, club: dict[str, Any], proposals: FakeProposals
) -> None:
    created = await _propose(agent, club)
    assert created.status_code == 201, created.text
    [stored] = proposals.proposals
    assert created.json()["proposal"]["preview"] == stored.preview
    assert created.json()["rendered_preview"]["lines"]


@pytest.mark.parametrize(
    ("refusal", "reason", "status", "code"),
    [
        ("rate_limited", Reason(code="rate_limited", params={"retry_after_s": 7}), 429, None),
        ("forbidden", Reason(code="forbidden", params={"role": "viewer"}), 403, None),
        ("unauthenticated", Reason(code="unauthenticated"), 401, None),
        ("not_stored", Reason(code="conversation_quota_exceeded"), 422, None),
    ],
)
async def test_each_refusal_keeps_its_http_meaning(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    proposals: FakeProposals,
    refusal: str,
    reason: Reason,
    status: int,
    code: str | None,
) -> None:
    proposals.refusal, proposals.refuse_with = refusal, reason
    refused = await _propose(agent, club)
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    expected = reason.code if status == 422 else refusal
    assert refused.json()["code"] == expected
    if status == 429:
        assert refused.headers["Retry-After"] == "7"


async def test_the_operations_own_rejection_is_a_422_with_its_code(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    other_club: dict[str, Any],
    proposals: FakeProposals,
) -> None:
    foreign = await _propose(agent, club, payment_id=other_club["refund_case"]["payment_id"])
    assert foreign.status_code == 422, foreign.text
    assert foreign.json()["code"] == "payment_not_found"
    assert proposals.proposals == []
