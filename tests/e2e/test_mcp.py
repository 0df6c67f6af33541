"""signoff's MCP server, driven by the mcp SDK's own client over stdio, against a real stack.

The tools come from the catalogue (one per operation the person may propose, its input the
operation's ``Request`` schema); a tool call stores a proposal and returns its preview —
nothing runs until a person approves in signoff; ``wait_for_decision`` then sees the outcome.
A viewer's server lists no propose tool, and a refused call is a tool error with signoff's code.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from e2e_stack import Stack
from mcp import ClientSession, StdioServerParameters, stdio_client
from test_lifecycle import refund_request

pytestmark = pytest.mark.e2e
REFUND_TOOL = "propose_order__refund_missing_discount"


@asynccontextmanager
async def mcp_session(stack: Stack, token: str) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "signoff_client.mcp_server"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "SIGNOFF_AGENT_URL": stack.url("agent"),
            "SIGNOFF_PROPOSALS_URL": stack.url("proposals"),
            "SIGNOFF_TOKEN": token,
        },
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _data(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


async def test_a_tool_call_proposes_and_only_a_persons_approval_executes(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    async with mcp_session(stack, manager) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {REFUND_TOOL, "get_proposal", "wait_for_decision"} <= set(tools)
        schema = tools[REFUND_TOOL].input_schema["properties"]["request"]
        assert set(schema["required"]) >= {"payment_id", "line_item_id", "discount_id"}

        called = await session.call_tool(
            REFUND_TOOL, {"resource_id": case["order_id"], "request": refund_request(case)}
        )
        assert not called.is_error, called.content
        proposed = _data(called)
        assert proposed["status"] == "pending" and proposed["rendered_preview"]["lines"]
        pid = proposed["id"]
        # nothing executes on the tool call: it stays pending until a person decides
        still = _data(await session.call_tool("get_proposal", {"proposal_id": pid}))
        assert still["status"] == "pending"

        waiting = asyncio.create_task(
            session.call_tool("wait_for_decision", {"proposal_id": pid, "timeout_s": 60})
        )
        assert (await stack.approve(manager, pid)).status_code == 200
        done = _data(await waiting)
    assert done["status"] == "succeeded" and done["outcome"] is not None


async def test_a_viewer_gets_no_propose_tool_and_a_refusal_is_a_tool_error(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    viewer = stack.token(org["users"]["viewer"], org)
    case = org["refund_case"]
    async with mcp_session(stack, viewer) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert not any(name.startswith("propose_") for name in names)
        refused = await session.call_tool(
            REFUND_TOOL, {"resource_id": case["order_id"], "request": refund_request(case)}
        )
    assert refused.is_error and _data(refused)["error"] == "forbidden"
