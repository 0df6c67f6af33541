"""Plain text and tool calls through the real openai SDK, whole and streamed."""

from __future__ import annotations

import json

import openai
import pytest
from signoff_scripted_model.testing import strict_tool

pytestmark = pytest.mark.e2e

LOOKUP = strict_tool("lookup", "Find things.", query={"type": "string"}, limit={"type": "integer"})
USER_JSON = json.dumps({"query": "refund for order 42", "limit": 3})


async def test_plain_text_is_the_echo_of_the_user(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "club"}],
            },
        ],
    )

    choice = completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("hello club", "stop")
    assert choice.message.tool_calls is None
    assert completion.model == "gpt-4o-mini"
    assert completion.usage is not None
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 3  # "hello club"


async def test_tool_call_with_json_arguments(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(
        model="scripted:call_first_tool",
        messages=[{"role": "user", "content": USER_JSON}],
        tools=[LOOKUP],
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"query": "refund for order 42", "limit": 3}


async def test_streamed_text_assembles_to_the_whole(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="scripted:say:Three small words, then more.",
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Three small words, then more."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert len([c for c in chunks if c.choices]) > 3  # really in pieces
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1


async def test_streamed_tool_calls_assembled_by_hand(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="scripted:call_first_tool",
        messages=[{"role": "user", "content": USER_JSON}],
        tools=[LOOKUP],
        stream=True,
    )
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for delta in choice.delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""

    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["name"] == "lookup" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == json.loads(USER_JSON)


async def test_streamed_tool_calls_through_the_sdk_stream_helper(
    client: openai.AsyncOpenAI,
) -> None:
    async with client.chat.completions.stream(
        model="scripted:call_first_tool",
        messages=[{"role": "user", "content": USER_JSON}],
        tools=[LOOKUP],
    ) as stream:
        done = [
            event async for event in stream if event.type == "tool_calls.function.arguments.done"
        ]
        final = await stream.get_final_completion()

    [call] = final.choices[0].message.tool_calls or []
    assert call.function.parsed_arguments == json.loads(USER_JSON)
    assert [event.parsed_arguments for event in done] == [json.loads(USER_JSON)]
    assert final.choices[0].finish_reason == "tool_calls"


async def test_models_lists_every_script(client: openai.AsyncOpenAI) -> None:
    models = [model.id async for model in client.models.list()]

    assert {"scripted:echo", "scripted:call_first_tool", "scripted:sample.lookup_then_act"} <= set(
        models
    )
    assert (await client.models.retrieve("scripted:echo")).owned_by == "signoff"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("scripted:no-such-script")
