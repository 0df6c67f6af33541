"""Talking to the assistants of a running stack: conversations, decisions, the model's log.

``assistant_stack`` runs the whole system (``e2e_stack.Stack``, the scripted model server
included) with settings of a module's choosing; ``Person`` is one demo member talking to it
over the public HTTP APIs; ``model`` is the scripted model server's admin client, whose request
log shows exactly what the agent sent the model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from e2e_stack import Stack, delete_topology, new_prefix
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import stack_env
from signoff_runtime.topology import Topology
from signoff_scripted_model.testing import ModelAdmin
from sqlalchemy.ext.asyncio import AsyncEngine


@asynccontextmanager
async def assistant_stack(
    database_url: str,
    amqp_url: str,
    engine: AsyncEngine,
    tmp_path_factory: pytest.TempPathFactory,
    extra_env: dict[str, str],
) -> AsyncIterator[Stack]:
    prefix = new_prefix()
    topology = Topology(prefix, delivery_limit=3)
    running = Stack(
        engine=engine,
        amqp_url=amqp_url,
        topology=topology,
        env={**stack_env(database_url, amqp_url, prefix), **extra_env},
        log_dir=tmp_path_factory.mktemp(f"logs-{prefix}"),
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()
        await running.http.aclose()
        await delete_topology(amqp_url, topology)


def card(messages: list[dict[str, Any]]) -> str:
    """The proposal id of the one card the assistant's reply ``messages`` hold."""
    [ready] = [m for m in messages if m["code"] == "proposal_ready"]
    return str(ready["proposal_id"])


@asynccontextmanager
async def model_admin(stack: Stack, script: str) -> AsyncIterator[ModelAdmin]:
    """The model server, reset and answering with ``script`` for the block."""
    admin = ModelAdmin(stack.url("model"))
    try:
        await admin.reset()
        await admin.force_script(script)
        yield admin
    finally:
        await admin.aclose()


@dataclass
class Person:
    stack: Stack
    org: dict[str, Any]
    role: str = "manager"

    @property
    def token(self) -> str:
        return self.stack.token(self.org["users"][self.role], self.org)

    @property
    def headers(self) -> dict[str, str]:
        return self.stack.auth(self.token)

    def agent(self, path: str) -> str:
        return f"{self.stack.url('agent')}{path}"

    def proposals(self, path: str) -> str:
        return f"{self.stack.url('proposals')}{path}"

    async def open(self, section: str = "orders", resource_id: str | None = None) -> str:
        resource_id = resource_id or (
            self.org["refund_case"]["order_id"]
            if section == "orders"
            else self.org["broadcast_case"]["broadcast_id"]
        )
        response = await self.stack.http.post(
            self.agent("/v1/conversations"),
            json={"section": section, "resource_id": resource_id},
            headers=self.headers,
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def propose_in_conversation(self) -> tuple[str, str]:
        """The order assistant's refund, proposed in a new conversation of the order (the
        scripted model's answer to "Check the discounts."): ``(conversation, proposal id)``."""
        conversation = await self.open()
        return conversation, card(await self.say(conversation, "Check the discounts."))

    async def say(self, conversation: str, content: str) -> list[dict[str, Any]]:
        response = await self.stack.http.post(
            self.agent(f"/v1/conversations/{conversation}/messages"),
            json={"content": content},
            headers=self.headers,
            timeout=60.0,
        )
        assert response.status_code == 200, response.text
        return list(response.json()["messages"])

    async def conversation(self, conversation: str) -> dict[str, Any]:
        response = await self.stack.http.get(
            self.agent(f"/v1/conversations/{conversation}"), headers=self.headers
        )
        response.raise_for_status()
        return dict(response.json())

    async def message_with(self, conversation: str, code: str) -> list[dict[str, Any]]:
        """Wait until the conversation holds a message with ``code``; return all such."""

        async def found() -> list[dict[str, Any]]:
            messages = (await self.conversation(conversation))["messages"]
            return [m for m in messages if m["code"] == code]

        return await wait_until(found, timeout=30, what=f"a {code} message in {conversation}")

    async def proposal(self, proposal_id: str) -> dict[str, Any]:
        return await self.stack.proposal(self.token, proposal_id)

    async def approve(self, proposal_id: str) -> httpx.Response:
        return await self.stack.approve(self.token, proposal_id)

    async def decline(self, proposal_id: str, reason: str | None = None) -> httpx.Response:
        return await self.stack.http.post(
            self.proposals(f"/v1/proposals/{proposal_id}/decline"),
            json={"reason": reason} if reason else {},
            headers=self.headers,
        )

    async def revise(self, proposal_id: str, request: dict[str, Any]) -> httpx.Response:
        return await self.stack.http.post(
            self.proposals(f"/v1/proposals/{proposal_id}/revise"),
            json={"request": request},
            headers=self.headers,
        )

    async def pause_point(self, pause_point_id: str) -> dict[str, Any]:
        response = await self.stack.http.get(
            self.proposals(f"/v1/pause-points/{pause_point_id}"), headers=self.headers
        )
        response.raise_for_status()
        return dict(response.json())

    async def resolve(self, pause_point_id: str, **answer: Any) -> httpx.Response:
        return await self.stack.http.post(
            self.proposals(f"/v1/pause-points/{pause_point_id}/resolve"),
            json=answer,
            headers=self.headers,
        )


async def tool_errors(admin: ModelAdmin) -> list[dict[str, Any]]:
    """Every tool result the agent sent the model that reports an error, in order."""
    errors = []
    for item in await admin.requests():
        last = item["body"]["messages"][-1]
        if last.get("role") == "tool":
            content = json.loads(last["content"])
            if isinstance(content, dict) and "error" in content:
                errors.append(content["error"])
    return errors


async def tool_calls(admin: ModelAdmin) -> list[tuple[str, Any]]:
    """Every tool call the model answered with, in order (from the server's own log)."""
    calls: list[tuple[str, Any]] = []
    for item in await admin.requests():
        for call in (item.get("response") or {}).get("tool_calls") or []:
            arguments = call["arguments"]
            calls.append(
                (call["name"], json.loads(arguments) if isinstance(arguments, str) else arguments)
            )
    return calls
