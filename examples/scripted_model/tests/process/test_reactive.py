"""Scripts react to what they are sent: ids from tool results, corrections after errors.

The test plays the agent: it runs the tools itself (with ids it makes up on the spot, so a
script that hard-coded one would fail) and sends each result back, as the agent loop will.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from signoff_scripted_model.testing import ModelAdmin, strict_tool

pytestmark = pytest.mark.e2e

MODEL = "scripted:sample.lookup_then_act"
TOOLS = [
    strict_tool("find_orders", query={"type": "string"}),
    strict_tool("refund_order", order_id={"type": "string"}, reason={"type": "string"}),
]


class Conversation:
    """The agent's side: messages so far; each turn asks the model once."""

    def __init__(self, client: openai.AsyncOpenAI, user: str) -> None:
        self.client = client
        self.messages: list[Any] = [{"role": "user", "content": user}]

    async def turn(self) -> ChatCompletionMessage:
        completion = await self.client.chat.completions.create(
            model=MODEL, messages=self.messages, tools=TOOLS
        )
        message = completion.choices[0].message
        self.messages.append(message.model_dump(exclude_none=True))
        return message

    def answer(self, message: ChatCompletionMessage, result: Any) -> dict[str, Any]:
        """Answer the message's one tool call; returns the call's arguments."""
        call = _only_call(message)
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
        )
        arguments: dict[str, Any] = json.loads(call.function.arguments)
        return arguments


def _only_call(message: ChatCompletionMessage) -> ChatCompletionMessageFunctionToolCall:
    [call] = message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    return call


def _name(message: ChatCompletionMessage) -> str:
    return _only_call(message).function.name


async def test_the_next_call_uses_the_id_from_the_tool_result(client: openai.AsyncOpenAI) -> None:
    order_id = f"ord_{uuid.uuid4().hex[:10]}"
    chat = Conversation(client, "the order with the missing discount")

    first = await chat.turn()
    assert _name(first) == "find_orders"
    assert chat.answer(first, {"items": [{"id": order_id, "total": 4200}]}) == {
        "query": "the order with the missing discount"
    }
    second = await chat.turn()
    assert _name(second) == "refund_order"
    assert chat.answer(second, {"status": "proposed"}) == {
        "order_id": order_id,
        "reason": "missing_discount",
    }
    last = await chat.turn()
    assert last.content == f"Refund of order {order_id} requested."


async def test_a_tool_error_that_says_how_is_corrected(client: openai.AsyncOpenAI) -> None:
    chat = Conversation(client, "refund it")
    chat.answer(await chat.turn(), {"items": [{"id": "ord_7"}]})
    refused = await chat.turn()
    chat.answer(
        refused,
        {"error": {"code": "unsupported_reason", "message": "no", "allowed": ["goodwill"]}},
    )

    retried = await chat.turn()

    assert _name(retried) == "refund_order"
    assert chat.answer(retried, {"status": "proposed"}) == {
        "order_id": "ord_7",
        "reason": "goodwill",
    }
    assert (await chat.turn()).content == "Refund of order ord_7 requested."


async def test_an_error_it_cannot_fix_is_explained_not_retried(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    chat = Conversation(client, "refund it")
    chat.answer(await chat.turn(), {"items": [{"id": "ord_8"}]})
    chat.answer(await chat.turn(), {"error": "order ord_8 is already refunded"})

    last = await chat.turn()

    assert last.content == "I could not do that: order ord_8 is already refunded"
    assert len(await admin.requests()) == 3


async def test_call_first_tool_reports_the_result_instead_of_calling_again(
    client: openai.AsyncOpenAI,
) -> None:
    messages: list[Any] = [{"role": "user", "content": '{"query": "x"}'}]
    first = await client.chat.completions.create(
        model="scripted:call_first_tool", messages=messages, tools=TOOLS
    )
    [call] = first.choices[0].message.tool_calls or []
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"items": []}'},
    ]

    second = await client.chat.completions.create(
        model="scripted:call_first_tool", messages=messages, tools=TOOLS
    )

    assert second.choices[0].message.content == '{"items": []}'
    assert second.choices[0].finish_reason == "stop"
