"""Server-sent events: a turn streamed as it runs, and a conversation followed as it changes."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from agent_testkit import FakeModel, FakeProposals, auth, call, pause_view_of, say
from faststream.rabbit import RabbitBroker
from signoff_contracts.v1 import PausePointResolved
from signoff_runtime.settings import broker_user
from signoff_runtime.topology import Topology

pytestmark = pytest.mark.integration


async def _frames(response: httpx.Response, stop: str | None = None) -> list[tuple[str, Any]]:
    frames: list[tuple[str, Any]] = []
    kind = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind:
            frames.append((kind, json.loads(line.removeprefix("data: "))))
            if kind == stop:
                break
    return frames


async def _open(http: httpx.AsyncClient, club: dict[str, Any]) -> str:
    opened = await http.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    return str(opened.json()["id"])


async def test_a_turn_streams_its_steps_then_its_messages(
    agent: httpx.AsyncClient, club: dict[str, Any], model: FakeModel
) -> None:
    model.steps = [call("get_order_investigation"), say("The early-bird discount is missing.")]
    conversation = await _open(agent, club)
    async with agent.stream(
        "POST",
        f"/v1/conversations/{conversation}/messages",
        json={"content": "Anything wrong?"},
        headers={**auth(club), "Accept": "text/event-stream"},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = await _frames(response)
    kinds = [kind for kind, _ in frames]
    assert kinds == ["message", "tool", "message", "done"]
    assert frames[0][1]["text"] == "Anything wrong?"
    assert frames[1][1] == {"name": "get_order_investigation"}
    assert frames[2][1]["role"] == "assistant"
    assert frames[2][1]["text"] == "The early-bird discount is missing."


async def test_the_events_stream_shows_a_turn_an_event_started(
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
    model.steps = [call("wait_for_approval", json.dumps(arguments)), say("Going on.")]
    conversation = await _open(agent, club)
    url = f"/v1/conversations/{conversation}/messages"
    await agent.post(url, json={"content": "Ask first."}, headers=auth(club))
    [asked] = proposals.pauses
    async with agent.stream(
        "GET", f"/v1/conversations/{conversation}/events", headers=auth(club)
    ) as response:
        resolved = pause_view_of(
            asked,
            status="resolved",
            resolution={"action": "approve"},
            resolved_at=datetime.now(UTC),
        )
        event = PausePointResolved(pause_point=resolved)
        async with RabbitBroker(amqp_url) as broker:
            await broker.publish(
                event.model_dump_json().encode(),
                exchange=topology.exchange("conversation-events"),
                routing_key="pause_point.resolved",
                message_id=event.message_id,
                user_id=broker_user(amqp_url),
            )
        ids: list[str] = []
        frames = await asyncio.wait_for(_until_turn_ends(response, ids), 20)
    messages = [data for kind, data in frames if kind == "message"]
    assert messages[0]["synthetic"] and messages[0]["text"].endswith("Approved.")
    assert messages[-1]["role"] == "assistant" and messages[-1]["text"] == "Going on."
    turns = [data["status"] for kind, data in frames if kind == "turn"]
    assert turns == ["started", "ended"]
    assert any(kind == "card" and data["status"] == "resolved" for kind, data in frames)
    # a reconnect resumes after the last event it saw: what followed is replayed, in order
    first_id = ids[0]
    async with agent.stream(
        "GET",
        f"/v1/conversations/{conversation}/events",
        headers={**auth(club), "Last-Event-ID": first_id},
    ) as again:
        replayed = await asyncio.wait_for(_until_turn_ends(again, []), 20)
    assert replayed == frames[1:]


async def _until_turn_ends(response: httpx.Response, ids: list[str]) -> list[tuple[str, Any]]:
    frames: list[tuple[str, Any]] = []
    kind = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            ids.append(line.removeprefix("id: "))
        elif line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind:
            frames.append((kind, json.loads(line.removeprefix("data: "))))
            if kind == "turn" and frames[-1][1]["status"] == "ended":
                return frames
    return frames
