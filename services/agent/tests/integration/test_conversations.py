"""Conversations over HTTP, with a fake model and a stand-in proposals service."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from agent_testkit import FakeModel, FakeProposals, auth, call, say
from signoff_agent.model import ModelUnavailable
from signoff_contracts.reasons import Reason
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def _open(http: httpx.AsyncClient, org: dict[str, Any], **body: Any) -> httpx.Response:
    body.setdefault("section", "orders")
    body.setdefault("resource_id", org["refund_case"]["order_id"])
    return await http.post("/v1/conversations", json=body, headers=auth(org))


def _refund(case: dict[str, Any], **extra: Any) -> str:
    request = {
        "payment_id": case["payment_id"],
        "line_item_id": case["line_item_id"],
        "discount_id": case["discount_id"],
        "destination": "original_payment_method",
    }
    return json.dumps({**request, **extra})


async def test_a_conversation_opens_only_on_a_resource_of_the_callers_organization(
    agent: httpx.AsyncClient, club: dict[str, Any], other_club: dict[str, Any]
) -> None:
    opened = await _open(agent, club)
    assert opened.status_code == 201, opened.text
    assert opened.json()["section"] == "orders" and opened.json()["messages"] == []
    foreign = await _open(agent, club, resource_id=other_club["refund_case"]["order_id"])
    assert foreign.status_code == 404 and foreign.json()["code"] == "resource_not_found"
    wrong_section = await _open(agent, club, resource_id=club["broadcast_case"]["broadcast_id"])
    assert wrong_section.status_code == 404
    unknown = await _open(agent, club, section="payroll")
    assert unknown.status_code == 422 and unknown.json()["code"] == "unknown_section"
    email = await _open(
        agent, club, section="email", resource_id=club["broadcast_case"]["broadcast_id"]
    )
    assert email.status_code == 201
    other = await agent.get(f"/v1/conversations/{opened.json()['id']}", headers=auth(other_club))
    assert other.status_code == 404
    assert (
        await agent.post("/v1/conversations", json={"section": "orders", "resource_id": "x"})
    ).status_code == 401


async def test_a_turn_reads_proposes_and_ends_on_the_card(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    engine: AsyncEngine,
) -> None:
    case = club["refund_case"]
    model.steps = [call("get_order_investigation"), call("propose_payment_refund", _refund(case))]
    conversation = (await _open(agent, club)).json()["id"]
    posted = await agent.post(
        f"/v1/conversations/{conversation}/messages",
        json={"content": "Was this order charged correctly?"},
        headers=auth(club),
    )
    assert posted.status_code == 200, posted.text
    said, card = posted.json()["messages"]
    assert said["role"] == "user" and said["text"] == "Was this order charged correctly?"
    assert card["role"] == "app" and card["code"] == "proposal_ready"
    assert card["proposal_id"] == proposals.proposals[0].proposal_id
    assert "review the card" in card["text"]
    assert len(model.requests) == 2  # never called again after the proposal
    stored = proposals.proposals[0]
    assert stored.conversation_id == conversation and stored.preview["amount_cents"] == 3500
    # the model saw the investigation: tool result in the second request
    investigation = json.loads(model.requests[1][-1]["content"])
    assert investigation["order"]["id"] == case["order_id"]
    names = [t["function"]["name"] for t in model.tools[0]]
    assert names == ["get_order_investigation", "propose_payment_refund", "wait_for_approval"]
    assert all(t["function"]["strict"] for t in model.tools[0])
    # no tenant id anywhere the model could read
    assert club["id"] not in json.dumps(model.requests[1])
    view = (
        await agent.get(f"/v1/conversations/{conversation}", headers=auth(club, "viewer"))
    ).json()
    assert [m["role"] for m in view["messages"]] == ["user", "app"]
    assert "Rien ne se passe" in view["messages"][1]["text"]  # the viewer reads French
    assert view["cards"][stored.proposal_id]["status"] == "pending"
    lease = await _scalar(
        engine, "SELECT turn_id FROM agent.conversations WHERE id = :c", c=conversation
    )
    assert lease is None


async def test_invalid_calls_go_back_to_the_model_then_the_person_is_told(
    agent: httpx.AsyncClient, club: dict[str, Any], model: FakeModel, proposals: FakeProposals
) -> None:
    case = club["refund_case"]
    model.steps = [
        call("propose_payment_refund", _refund(case, amount_cents=500)),
        call("propose_payment_refund", _refund(case, payment_id="pay_elsewhere")),
        call("propose_payment_refund", "{not json"),
        say("never asked"),
    ]
    conversation = (await _open(agent, club)).json()["id"]
    posted = await agent.post(
        f"/v1/conversations/{conversation}/messages",
        json={"content": "Refund $5"},
        headers=auth(club),
    )
    told = posted.json()["messages"][-1]
    assert told["code"] == "invalid_calls_exhausted" and "3 tries" in told["text"]
    assert proposals.proposals == [] and len(model.requests) == 3
    first = json.loads(model.requests[1][-1]["content"])["error"]
    assert first["fields"][0]["field"] == "amount_cents"
    assert "works out amounts" in first["fields"][0]["problem"]
    second = json.loads(model.requests[2][-1]["content"])["error"]
    assert second["code"] == "payment_not_found" and "not part of the order" in second["message"]


async def test_a_refusal_by_the_proposals_service_is_told_to_the_person(
    agent: httpx.AsyncClient, club: dict[str, Any], model: FakeModel, proposals: FakeProposals
) -> None:
    proposals.refuse_with = Reason(code="conversation_quota_exceeded", params={"limit": 5})
    model.steps = [call("propose_payment_refund", _refund(club["refund_case"]))]
    conversation = (await _open(agent, club)).json()["id"]
    posted = await agent.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "Refund"}, headers=auth(club)
    )
    told = posted.json()["messages"][-1]
    assert told["code"] == "proposal_refused" and "already has 5 cards waiting" in told["text"]
    assert len(model.requests) == 1


async def test_a_model_failure_leaves_the_conversation_consistent(
    agent: httpx.AsyncClient, club: dict[str, Any], model: FakeModel, engine: AsyncEngine
) -> None:
    model.steps = [call("get_order_investigation"), ModelUnavailable("model_timeout"), say("Back.")]
    conversation = (await _open(agent, club)).json()["id"]
    url = f"/v1/conversations/{conversation}/messages"
    first = await agent.post(url, json={"content": "Hello?"}, headers=auth(club))
    assert [m["code"] for m in first.json()["messages"]] == [None, "model_unavailable"]
    assert "no answer in time" in first.json()["messages"][1]["text"]
    second = await agent.post(url, json={"content": "Again?"}, headers=auth(club))
    assert second.json()["messages"][-1]["text"] == "Back."
    roles = await _scalar(
        engine,
        "SELECT string_agg(role, ',' ORDER BY seq) FROM agent.messages WHERE conversation_id = :c",
        c=conversation,
    )
    assert roles == "user,app,user,assistant"


async def test_one_turn_at_a_time_and_only_the_owner_talks(
    agent: httpx.AsyncClient, club: dict[str, Any], engine: AsyncEngine
) -> None:
    conversation = (await _open(agent, club)).json()["id"]
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE agent.conversations SET turn_id = 'trn_x', "
                "turn_expires_at = now() + interval '1 minute' WHERE id = :c"
            ),
            {"c": conversation},
        )
    url = f"/v1/conversations/{conversation}/messages"
    busy = await agent.post(url, json={"content": "Hi"}, headers=auth(club))
    assert busy.status_code == 409 and busy.json()["code"] == "turn_in_progress"
    not_owner = await agent.post(url, json={"content": "Hi"}, headers=auth(club, "viewer"))
    assert not_owner.status_code == 403
    count = await _scalar(
        engine, "SELECT count(*) FROM agent.messages WHERE conversation_id = :c", c=conversation
    )
    assert count == 0


async def _scalar(engine: AsyncEngine, sql: str, **params: Any) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(sql), params)).scalar()
