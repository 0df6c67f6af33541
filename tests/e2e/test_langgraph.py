"""The LangGraph adapter, run by the real framework against the scripted model.

A real ``StateGraph`` with an in-memory checkpointer: a model node (the scripted
OpenAI-compatible server, called with the ``openai`` SDK since no LangChain chat-model package
is installed) calls signoff's generated tool through LangGraph's ``ToolNode``; the graph then
pauses at ``interrupt()`` with a pending proposal — nothing executed. A person approves in
signoff; the graph is resumed with ``Command(resume=…)`` and its final state holds signoff's
outcome, which the model reads back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from assistants_kit import model_admin
from e2e_stack import Stack
from langchain_core.messages import AIMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from openai import AsyncOpenAI
from signoff_client import AsyncSignoffClient
from signoff_client.langgraph import (
    SignoffState,
    decided,
    resume_when_decided,
    signoff_tools,
    tool_name,
    wait_for_decision,
)
from test_lifecycle import refund_request

pytestmark = pytest.mark.e2e
REFUND = "order.refund_missing_discount"


def build_graph(model: AsyncOpenAI, tools: list[BaseTool]) -> CompiledStateGraph[Any]:
    offered = [convert_to_openai_tool(tool) for tool in tools]

    async def call_model(state: SignoffState) -> dict[str, Any]:
        reply = await model.chat.completions.create(
            model="scripted",
            messages=convert_to_openai_messages(state["messages"]),  # type: ignore[arg-type]
            tools=offered,  # type: ignore[arg-type]
        )
        said = reply.choices[0].message
        calls = [
            {"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id}
            for c in said.tool_calls or ()
            if c.type == "function"
        ]
        return {"messages": [AIMessage(content=said.content or "", tool_calls=calls)]}

    graph = StateGraph(SignoffState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_node("signoff", wait_for_decision)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "signoff")
    graph.add_edge("signoff", "model")
    return graph.compile(checkpointer=InMemorySaver())


async def test_a_graph_proposes_pauses_for_a_person_and_resumes_with_the_outcome(
    stack: Stack,
) -> None:
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    config: RunnableConfig = {"configurable": {"thread_id": "support-1"}}
    async with (
        AsyncOpenAI(base_url=f"{stack.url('model')}/v1", api_key="scripted") as model,
        AsyncSignoffClient(stack.url("agent"), stack.url("proposals"), manager) as client,
    ):
        tools = await signoff_tools(client, kinds=[REFUND])
        assert [tool.name for tool in tools.tools] == [tool_name(REFUND)]
        app = build_graph(model, tools.tools)

        async with model_admin(stack, "call_first_tool") as admin:
            asked = json.dumps({"resource_id": case["order_id"], "request": refund_request(case)})
            paused = await app.ainvoke({"messages": [("user", asked)]}, config)
            [pid] = tools.proposed
            [pause] = paused["__interrupt__"]
            assert pause.value == {"proposal_ids": [pid]}
            assert str(paused["messages"][-1].content).startswith("waiting for approval:")
            assert (await app.aget_state(config)).next == ("signoff",)
            assert (await client.get(pid)).status.value == "pending"  # proposing ran nothing

            assert (await client.approve(pid)).result == "claimed"
            await admin.force_script("echo")
            done = await resume_when_decided(app, config, client, timeout=60)

    [decision] = done["decisions"]
    outcome = decided(decision)
    assert (decision["proposal_id"], outcome.id) == (pid, pid)
    assert outcome.decided_by and outcome.outcome is not None
    assert "approved by" in decision["text"] and "succeeded" in decision["text"]
    assert done["messages"][-1].content == decision["text"]  # the model read signoff's words
    assert "__interrupt__" not in done and (await app.aget_state(config)).next == ()
