"""Hand-back without the model: proposal events, pause points, the event stream, and who the
agent's requests speak for."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from agent_testkit import (
    FakeModel,
    FakeProposals,
    auth,
    call,
    changed,
    pause_view_of,
    say,
    view_of,
)
from faststream.rabbit import RabbitBroker
from signoff_agent import handback, repository
from signoff_contracts.outcomes import RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import PausePointResolved, ProposalEvent
from signoff_runtime.settings import AuthSettings, broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.statements import statements
from signoff_runtime.tokens import AGENT_AUDIENCE, verify_token
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def _refund(case: dict[str, Any], destination: str = "original_payment_method") -> str:
    keys = ("payment_id", "line_item_id", "discount_id")
    return json.dumps({**{k: case[k] for k in keys}, "destination": destination})


async def _proposed(
    http: httpx.AsyncClient, club: dict[str, Any], model: FakeModel, proposals: FakeProposals
) -> tuple[str, Any]:
    model.steps = [call("propose_payment_refund", _refund(club["refund_case"]))]
    opened = await http.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    conversation = opened.json()["id"]
    posted = await http.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "Fix it"}, headers=auth(club)
    )
    assert posted.status_code == 200, posted.text
    [card] = [m for m in posted.json()["messages"] if m["code"] == "proposal_ready"]
    assert card["proposal_id"] == proposals.proposals[-1].proposal_id
    return conversation, proposals.proposals[-1]


async def _publish(amqp_url: str, topology: Topology, routing_key: str, message: Any) -> None:
    async with RabbitBroker(amqp_url) as broker:
        await broker.publish(
            message.model_dump_json().encode(),
            exchange=topology.exchange("conversation-events"),
            routing_key=routing_key,
            message_id=message.message_id,
            content_type="application/json",
            user_id=broker_user(amqp_url),
        )


async def _messages(http: httpx.AsyncClient, club: dict[str, Any], conversation: str) -> list[Any]:
    view = await http.get(f"/v1/conversations/{conversation}", headers=auth(club))
    return list(view.json()["messages"])


async def _sse(
    http: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    until: str,
    into: list[Any],
    connected: asyncio.Event,
) -> None:
    async with http.stream("GET", url, headers=headers) as response:
        event = None
        async for line in response.aiter_lines():
            if line.startswith(": connected"):
                connected.set()
            elif line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event is not None:
                into.append((event, json.loads(line.removeprefix("data: "))))
                if event == "message" and into[-1][1].get("code") == until:
                    return


async def test_an_outcome_writes_one_message_however_often_it_arrives_and_streams_it(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    conversation, stored = await _proposed(agent, club, model, proposals)
    url = f"/v1/conversations/{conversation}/events"
    seen: list[Any] = []
    connected = asyncio.Event()
    listener = asyncio.create_task(
        _sse(agent, url, auth(club, "viewer"), "proposal_succeeded", seen, connected)
    )
    await asyncio.wait_for(connected.wait(), 10)
    result = {
        "refund_id": "rfd_1",
        "amount_cents": 3_500,
        "currency": "CAD",
        "destination": "card_refund",
        "resulting_order_total_cents": 40_999,
        "provider_refund_id": "re_1",
        "card_last4": "4242",
    }
    view = changed(view_of(stored), status="succeeded", outcome=Succeeded(result=result))
    event = ProposalEvent(event="outcome", proposal=view, source="proposals")
    again = ProposalEvent(event="outcome", proposal=view, source="proposals")  # a new message id
    for message in (event, event, again):
        await _publish(amqp_url, topology, "proposal.outcome", message)
    await asyncio.wait_for(listener, 15)
    follow_ups = [
        m for m in await _messages(agent, club, conversation) if m["code"] == "proposal_succeeded"
    ]
    assert len(follow_ups) == 1
    streamed = [data for kind, data in seen if kind == "message"]
    assert streamed[-1]["code"] == "proposal_succeeded"
    # the operation's own words for the stored result, in the viewer's locale
    assert streamed[-1]["text"] == (
        "C'est fait : 35,00 CAD remboursés sur la carte se terminant par 4242 "
        "(remboursement re_1) ; le total de la commande est maintenant de 409,99 CAD."
    )
    cards = [data for kind, data in seen if kind == "card"]
    assert cards and cards[-1]["status"] == "succeeded"
    assert len(model.requests) == 1  # the model was not resumed


async def test_the_turn_shows_its_card_even_when_the_created_event_wrote_it_first(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
    engine: AsyncEngine,
) -> None:
    async def event_first(msg: Any) -> None:
        event = ProposalEvent(event="created", proposal=view_of(msg), source="proposals")
        await _publish(amqp_url, topology, "proposal.created", event)

        async def written() -> bool:
            sql = "SELECT count(*) FROM agent.messages WHERE proposal_id = :p AND kind = 'card'"
            async with engine.connect() as conn:
                return bool((await conn.execute(text(sql), {"p": msg.proposal_id})).scalar())

        await wait_until(written, what="the card written by the event")

    proposals.before_reply = event_first
    conversation, stored = await _proposed(agent, club, model, proposals)
    messages = await _messages(agent, club, conversation)
    cards = [m for m in messages if m["proposal_id"] == stored.proposal_id]
    assert [m["code"] for m in cards] == ["proposal_ready"]


async def test_a_decline_reason_is_context_on_the_next_message(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    conversation, stored = await _proposed(agent, club, model, proposals)
    view = changed(
        view_of(stored), status="declined", decline_reason="Refund it as account credit instead"
    )
    await _publish(
        amqp_url, topology, "proposal.decided", ProposalEvent(event="decided", proposal=view)
    )

    async def declined() -> bool:
        return any(
            m["code"] == "proposal_declined" for m in await _messages(agent, club, conversation)
        )

    await wait_until(declined, what="the decline message")
    model.steps = [say("Understood."), say("Again.")]
    url = f"/v1/conversations/{conversation}/messages"
    await agent.post(url, json={"content": "What now?"}, headers=auth(club))
    context = model.requests[-1][1]["content"]
    assert "declined proposal " + stored.proposal_id in context
    assert "Refund it as account credit instead" in context
    await agent.post(url, json={"content": "And now?"}, headers=auth(club))
    assert "Since your last turn" not in model.requests[-1][1]["content"]  # consumed once


async def test_a_revision_required_outcome_is_context_too(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    conversation, stored = await _proposed(agent, club, model, proposals)
    reason = Reason(code="amount_changed", params={"previous_cents": 3500, "current_cents": 2000})
    view = changed(
        view_of(stored), status="revision_required", outcome=RevisionRequired(reason=reason)
    )
    await _publish(
        amqp_url, topology, "proposal.outcome", ProposalEvent(event="outcome", proposal=view)
    )

    async def told() -> list[Any]:
        return [
            m
            for m in await _messages(agent, club, conversation)
            if m["code"] == "proposal_revision_required"
        ]

    [message] = await wait_until(told, what="the revision message")
    assert "2000 cents instead of 3500" in message["text"]
    model.steps = [say("Looking again.")]
    await agent.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "?"}, headers=auth(club)
    )
    assert "2000 cents instead of 3500" in model.requests[-1][1]["content"]


async def test_a_superseding_proposal_replaces_the_card(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    conversation, stored = await _proposed(agent, club, model, proposals)
    new = dataclasses.replace(stored, view=changed(stored.view, id="prp_01revised"))
    old_view = changed(view_of(stored), status="superseded", superseded_by=new.proposal_id)
    await _publish(
        amqp_url,
        topology,
        "proposal.superseded",
        ProposalEvent(event="superseded", proposal=old_view),
    )
    await _publish(
        amqp_url,
        topology,
        "proposal.created",
        ProposalEvent(event="created", proposal=view_of(new)),
    )

    async def replaced() -> dict[str, Any] | None:
        view = (await agent.get(f"/v1/conversations/{conversation}", headers=auth(club))).json()
        cards = view["cards"]
        codes = {(m["code"], m["proposal_id"]) for m in view["messages"] if m["role"] == "app"}
        # the two events may be handled in either order: wait for both to be written
        if (
            cards.get(new.proposal_id, {}).get("replaces")
            and cards[stored.proposal_id]["status"] == "superseded"
            and ("proposal_ready", new.proposal_id) in codes
        ):
            return dict(view)
        return None

    view = await wait_until(replaced, what="the new card and its message")
    assert view["cards"][stored.proposal_id]["replaced_by"] == new.proposal_id
    assert view["cards"][new.proposal_id]["replaces"] == stored.proposal_id
    codes = [(m["code"], m["proposal_id"]) for m in view["messages"] if m["role"] == "app"]
    assert codes.count(("proposal_revised", new.proposal_id)) == 1


async def test_a_pause_point_halts_then_its_resolution_runs_the_next_turn_once(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
    engine: AsyncEngine,
) -> None:
    arguments = {
        "title": "Which destination?",
        "description": "Pick one",
        "options": ["Card", "Credit"],
        "payload": '{"step": 1}',
        "kind": None,
        "form_schema": None,
    }
    model.steps = [call("wait_for_approval", json.dumps(arguments)), say("Credit it is.")]
    opened = await agent.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    conversation = opened.json()["id"]
    posted = await agent.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "Ask me"}, headers=auth(club)
    )
    card = posted.json()["messages"][-1]
    [asked] = proposals.pauses
    assert card["code"] == "pause_point_card" and card["pause_point_id"] == asked.pause_point_id
    assert asked.kind == "choice" and asked.payload == {"step": 1}
    assert asked.conversation_id == conversation and len(model.requests) == 1
    # owner-only unless the assistant says otherwise; the turn that asked is the card's turn
    assert asked.answerable_by == "owner"
    async with engine.connect() as conn:
        card_turn = await conn.scalar(
            text("SELECT turn_id FROM agent.messages WHERE pause_point_id = :p"),
            {"p": asked.pause_point_id},
        )
    assert asked.turn_id is not None and asked.turn_id == card_turn
    now = datetime.now(UTC)
    resolved = pause_view_of(
        asked,
        status="resolved",
        # the person edited the payload before choosing (the payload override)
        resolution={"action": "option", "option": "Credit", "payload": {"step": 2}},
        resolved_by=club["users"]["manager"]["id"],
        resolved_at=now,
    )
    copies = [PausePointResolved(pause_point=resolved, source="proposals") for _ in range(2)]
    for message in copies:
        await _publish(amqp_url, topology, "pause_point.resolved", message)

    async def answered() -> list[Any] | None:
        messages = await _messages(agent, club, conversation)
        return messages if messages[-1]["text"] == "Credit it is." else None

    messages = await wait_until(answered, what="the next turn")
    synthetic = [m for m in messages if m["synthetic"]]
    assert len(synthetic) == 1 and synthetic[0]["role"] == "user"
    assert "Chose: Credit" in synthetic[0]["text"]
    assert 'With the payload edited to: {"step": 2}' in synthetic[0]["text"]
    assert model.requests[-1][-1]["content"] == synthetic[0]["text"]

    async def both_handled() -> bool:
        ids = [m.message_id for m in copies]
        sql = "SELECT count(*) FROM agent.inbox WHERE message_id = ANY(:ids)"
        settled = (
            "SELECT turn_id IS NULL AND pending_trigger IS NULL "
            "FROM agent.conversations WHERE id = :c"
        )
        async with engine.connect() as conn:
            handled = (await conn.execute(text(sql), {"ids": ids})).scalar()
            idle = (await conn.execute(text(settled), {"c": conversation})).scalar()
        return handled == 2 and bool(idle)

    await wait_until(both_handled, what="both copies handled")
    assert len(model.requests) == 2  # the duplicate ran no second turn


async def test_an_expired_pause_point_is_ignored_on_resume(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    arguments = {
        "title": "Go on?",
        "description": "d",
        "options": None,
        "payload": None,
        "kind": "approval",
        "form_schema": None,
    }
    model.steps = [call("wait_for_approval", json.dumps(arguments))]
    opened = await agent.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    conversation = opened.json()["id"]
    await agent.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "?"}, headers=auth(club)
    )
    [asked] = proposals.pauses
    past = datetime.now(UTC) - timedelta(minutes=1)
    late = pause_view_of(
        asked,
        status="resolved",
        resolution={"action": "approve"},
        expires_at=past,
        resolved_at=datetime.now(UTC),
    )
    await _publish(amqp_url, topology, "pause_point.resolved", PausePointResolved(pause_point=late))

    async def noted() -> bool:
        return any(
            m["code"] == "pause_point_expired" for m in await _messages(agent, club, conversation)
        )

    await wait_until(noted, what="the expiry note")
    assert not any(m["synthetic"] for m in await _messages(agent, club, conversation))
    assert len(model.requests) == 1


async def test_a_proposal_request_carries_the_request_and_the_token_never_a_contract(
    agent: httpx.AsyncClient, club: dict[str, Any], model: FakeModel, proposals: FakeProposals
) -> None:
    _, stored = await _proposed(agent, club, model, proposals)
    sent = stored.request
    assert sent.version == 2 and sent.resumed_from is None
    assert (
        verify_token(AuthSettings(), sent.token, audience=AGENT_AUDIENCE).sub
        == club["users"]["manager"]["id"]
    )
    assert sent.request == json.loads(_refund(club["refund_case"]))
    wire = json.loads(sent.model_dump_json())
    for absent in ("arguments", "preview", "organization_id", "requested_by", "section"):
        assert absent not in wire, absent
    # what the person sees is what the proposals service resolved
    assert stored.preview["amount_cents"] == 3500


async def test_a_turn_started_by_a_resolution_proposes_through_that_pause_point(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> None:
    """No token lives beyond the person's own turn: the resumed turn names the pause point."""
    ask: dict[str, Any] = {
        "title": "Refund it?",
        "description": "Say so",
        "options": [],
        "payload": None,
    }
    ask |= {"kind": "approval", "form_schema": None}
    model.steps = [
        call("wait_for_approval", json.dumps(ask)),
        call("propose_payment_refund", _refund(club["refund_case"])),
    ]
    opened = await agent.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    conversation = opened.json()["id"]
    await agent.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "Ask"}, headers=auth(club)
    )
    [asked] = proposals.pauses
    assert asked.request.token is not None and asked.requested_by == club["users"]["manager"]["id"]
    resolved = pause_view_of(
        asked,
        status="resolved",
        resolution={"action": "approve"},
        resolved_by=club["users"]["manager"]["id"],
        resolved_at=datetime.now(UTC),
    )
    await _publish(
        amqp_url, topology, "pause_point.resolved", PausePointResolved(pause_point=resolved)
    )

    async def proposed() -> Any:
        return proposals.proposals[-1] if proposals.proposals else None

    stored = await wait_until(proposed, what="the resumed turn's proposal")
    assert stored.request.token is None and stored.request.resumed_from == asked.pause_point_id
    assert stored.view.requested_by == club["users"]["manager"]["id"]


async def test_an_assistant_declared_team_answerable_says_so_on_its_pause_points(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from signoff_club.assistants import OrderAssistant

    monkeypatch.setattr(OrderAssistant, "pause_points_answerable_by", "team")
    # the model cannot widen it: the tool has no such argument (strict schema, extra forbidden)
    arguments: dict[str, Any] = {
        "title": "Go ahead?",
        "description": "Check",
        "options": [],
        "payload": None,
    }
    model.steps = [
        call("wait_for_approval", json.dumps({**arguments, "kind": None, "form_schema": None}))
    ]
    opened = await agent.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    await agent.post(
        f"/v1/conversations/{opened.json()['id']}/messages",
        json={"content": "Ask the team"},
        headers=auth(club),
    )
    [asked] = proposals.pauses
    assert asked.answerable_by == "team" and asked.turn_id is not None


async def test_an_outcome_is_handed_back_in_three_statements_and_a_repeat_writes_no_message(
    agent: httpx.AsyncClient,
    club: dict[str, Any],
    model: FakeModel,
    proposals: FakeProposals,
    engine: AsyncEngine,
) -> None:
    """A performance budget (docs/benchmarks.md): the conversation locked with the card's
    status, the card with its journal row, the message with its journal row and its note — each
    one hot statement, none through SQLAlchemy Core. A second copy of the outcome (a new message
    id, past the inbox) writes no second message or note."""
    conversation, stored = await _proposed(agent, club, model, proposals)
    outcome = Succeeded(result={"refund_id": "rfd_9", "amount_cents": 100})
    view = changed(view_of(stored), status="succeeded", outcome=outcome)
    event = ProposalEvent(event="outcome", proposal=view, source="proposals")

    async def journal() -> list[tuple[str, str]]:
        sql = "SELECT kind, ref FROM agent.journal WHERE conversation_id = :c ORDER BY seq"
        async with engine.connect() as conn:
            return [(r.kind, r.ref) for r in await conn.execute(text(sql), {"c": conversation})]

    before = await journal()
    for expected in (True, False):
        with statements(engine) as (core, hot):
            async with unit_of_work(engine) as tx:
                assert await handback.apply(tx.conn, event) is expected
        assert not core and len(hot) == 3, (core, hot)

    after = await journal()
    async with engine.connect() as conn:
        [message_id] = (
            await conn.execute(
                text("SELECT id FROM agent.messages WHERE proposal_id = :p AND kind = :k"),
                {"p": stored.proposal_id, "k": "outcome:succeeded"},
            )
        ).scalars()
        notes = (
            await conn.execute(
                text("SELECT code, params FROM agent.notes WHERE proposal_id = :p"),
                {"p": stored.proposal_id},
            )
        ).all()
        status = await conn.scalar(
            text("SELECT status FROM agent.cards WHERE id = :p"), {"p": stored.proposal_id}
        )
    assert status == "succeeded"
    assert [(n.code, n.params["result"]) for n in notes] == [("succeeded", outcome.result)]
    # each write's journal row: the card twice (the repeat re-states it), the message once
    assert after[len(before) :] == [
        ("card", stored.proposal_id),
        ("message", message_id),
        ("card", stored.proposal_id),
    ]


def test_a_card_column_that_does_not_exist_is_refused() -> None:
    with pytest.raises(TypeError, match="colour"):
        repository._card_sql(("colour",), False)
