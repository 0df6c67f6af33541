"""The OpenAI Agents SDK adapter, run by the real framework against the scripted model.

The Agents SDK's own ``Runner`` drives an agent whose model (the scripted OpenAI-compatible
server, chat completions) calls signoff's generated tool: the run ends with "waiting for
approval" and a pending proposal — nothing executed. A person approves in signoff; the helper
waits for the outcome and the run resumes with signoff's account of it.
"""

from __future__ import annotations

import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from assistants_kit import model_admin
from e2e_stack import Stack
from openai import AsyncOpenAI
from signoff_client import AsyncSignoffClient
from signoff_client.agents_sdk import signoff_tools, tool_name
from test_lifecycle import refund_request

pytestmark = pytest.mark.e2e
REFUND = "order.refund_missing_discount"


async def test_a_run_proposes_waits_for_a_person_and_resumes_with_the_outcome(
    stack: Stack,
) -> None:
    set_tracing_disabled(True)  # the SDK's own trace export would call OpenAI's servers
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    # closed at the end: an unclosed client's pooled connection surfaced later as an "unclosed
    # socket" ResourceWarning in whichever test was running when it was collected
    async with (
        AsyncOpenAI(base_url=f"{stack.url('model')}/v1", api_key="scripted") as openai_client,
        AsyncSignoffClient(stack.url("agent"), stack.url("proposals"), manager) as client,
    ):
        model = OpenAIChatCompletionsModel(model="scripted", openai_client=openai_client)
        tools = await signoff_tools(client, kinds=[REFUND])
        assert [tool.name for tool in tools.tools] == [tool_name(REFUND)]
        agent = Agent(
            name="support", instructions="Help with orders.", tools=tools.tools, model=model
        )

        async with model_admin(stack, "call_first_tool") as admin:
            asked = json.dumps({"resource_id": case["order_id"], "request": refund_request(case)})
            first = await Runner.run(agent, asked)
            assert str(first.final_output).startswith("waiting for approval:")
            [pid] = tools.proposed
            assert (await client.get(pid)).status.value == "pending"  # proposing ran nothing

            assert (await client.approve(pid)).result == "claimed"
            text = await tools.handback(pid, timeout=60)
            assert "approved by" in text and "succeeded" in text

            await admin.force_script("echo")
            resumed = await Runner.run(
                agent, [*first.to_input_list(), {"role": "user", "content": text}]
            )
    assert resumed.final_output == text
