"""The request log: every completion request, in order, with what answered it."""

from __future__ import annotations

import openai
import pytest
from signoff_scripted_model.testing import ModelAdmin, strict_tool

pytestmark = pytest.mark.e2e


async def test_every_request_body_in_order_with_its_outcome(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    context = "Proposal prp_1 was declined: wrong customer."
    await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "first"}]
    )
    completion = await client.chat.completions.create(
        model="scripted:call_first_tool",
        messages=[{"role": "system", "content": context}, {"role": "user", "content": "{}"}],
        tools=[strict_tool("ping")],
        stream=False,
    )

    first, second = await admin.requests()
    assert (first["seq"], second["seq"]) == (1, 2)
    assert first["body"]["messages"] == [{"role": "user", "content": "first"}]
    assert first["response"] == {"finish_reason": "stop", "text": "first", "tool_calls": []}
    assert context in second["body"]["messages"][0]["content"]  # the context the agent sent
    assert second["body"]["tools"][0]["function"]["name"] == "ping"
    assert (second["script"], second["status"], second["fault"]) == ("call_first_tool", 200, None)
    [call] = completion.choices[0].message.tool_calls or []
    assert second["response"]["tool_calls"] == [{"id": call.id, "name": "ping", "arguments": "{}"}]


async def test_refused_requests_are_logged_too(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="gpt-4o", messages=[])

    [logged] = await admin.requests()
    assert (logged["status"], logged["script"], logged["response"]) == (400, None, None)


async def test_reset_empties_the_log(client: openai.AsyncOpenAI, admin: ModelAdmin) -> None:
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    await admin.reset()

    assert await admin.requests() == []
