"""What the real API refuses, refused here too — as the SDK's BadRequestError."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from signoff_scripted_model.testing import strict_tool

pytestmark = pytest.mark.e2e

PING = strict_tool("ping")


async def _refusal(client: openai.AsyncOpenAI, **request: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="scripted:echo", **request)
    return caught.value


async def test_tool_names_must_match_the_api_pattern(client: openai.AsyncOpenAI) -> None:
    error = await _refusal(
        client,
        messages=[{"role": "user", "content": "x"}],
        tools=[strict_tool("order.refund_missing_discount")],
    )

    assert error.param == "tools[0].function.name"
    assert "does not match pattern" in error.message


async def test_strict_schemas_must_close_and_require_every_property(
    client: openai.AsyncOpenAI,
) -> None:
    open_schema = {
        "type": "object",
        "properties": {"note": {"type": "string"}},
        "required": ["note"],
    }
    tool = {
        "type": "function",
        "function": {"name": "t", "strict": True, "parameters": open_schema},
    }

    error = await _refusal(client, messages=[{"role": "user", "content": "x"}], tools=[tool])

    assert error.param == "tools[0].function.parameters"
    assert "'additionalProperties' is required to be supplied and to be false" in error.message


async def test_a_tool_call_must_be_answered_before_the_conversation_goes_on(
    client: openai.AsyncOpenAI,
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
    error = await _refusal(
        client,
        messages=[
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "user", "content": "and?"},
        ],
        tools=[PING],
    )

    assert "did not have response messages: call_1" in error.message


async def test_a_tool_message_must_answer_a_call(client: openai.AsyncOpenAI) -> None:
    error = await _refusal(
        client,
        messages=[
            {"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "call_nobody_made", "content": "{}"},
        ],
    )

    assert error.param == "messages.[1].role"


async def test_a_script_failure_is_a_500_naming_the_script(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(
            model="scripted:call_first_tool",
            messages=[{"role": "user", "content": "not json"}],
            tools=[PING],
        )

    assert caught.value.status_code == 500
    assert caught.value.code == "script_failed"
    assert "call_first_tool" in caught.value.message


async def test_a_reply_the_request_did_not_allow_is_the_script_s_bug(
    client: openai.AsyncOpenAI,
) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(
            model="scripted:call_first_tool",
            messages=[{"role": "user", "content": "{}"}],
            tools=[PING],
            tool_choice="none",
        )

    assert "tool_choice is 'none'" in caught.value.message
