"""The openai SDK behind ``ChatModel``: every failure becomes one ``ModelUnavailable`` code.

The SDK runs against an injected transport (no network, no patching); its own bounded retries
are exercised (``max_retries=1``: two attempts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI
from signoff_agent.model import ModelReply, ModelUnavailable, OpenAIChatModel, ToolCall

Handler = Callable[[httpx2.Request], httpx2.Response]


def _model(handler: Handler, retries: int = 1) -> tuple[OpenAIChatModel, list[Any]]:
    seen: list[Any] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        return handler(request)

    client = AsyncOpenAI(
        base_url="http://model.test/v1",
        api_key="k",
        max_retries=retries,
        timeout=2.0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(record)),
    )
    return OpenAIChatModel(client, "scripted:x"), seen


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


async def test_tool_calls_and_text_come_back_typed() -> None:
    call = {"id": "t1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    model, seen = _model(
        lambda _: httpx2.Response(
            200, json=_completion({"role": "assistant", "content": None, "tool_calls": [call]})
        )
    )
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    reply = await model.complete([{"role": "user", "content": "hi"}], tools)
    assert reply == ModelReply(None, (ToolCall("t1", "read", "{}"),))
    assert seen[0]["model"] == "scripted:x" and seen[0]["tools"] == tools


@pytest.mark.parametrize(
    ("response", "code", "attempts"),
    [
        (httpx2.Response(429, json={"error": {"message": "slow down"}}), "model_rate_limited", 2),
        (httpx2.Response(503, json={"error": {"message": "down"}}), "model_unavailable", 2),
        (httpx2.Response(200, content=b"<html>not json"), "model_bad_response", 1),
        (httpx2.Response(200, json={"choices": []}), "model_bad_response", 1),
        (
            httpx2.Response(200, json=_completion({"role": "assistant", "content": ""})),
            "model_bad_response",
            1,
        ),
        (httpx2.Response(401, json={"error": {"message": "key"}}), "model_unavailable", 1),
    ],
)
async def test_failures_become_a_code_after_bounded_retries(
    response: httpx2.Response, code: str, attempts: int
) -> None:
    model, seen = _model(lambda _: response)
    with pytest.raises(ModelUnavailable) as raised:
        await model.complete([{"role": "user", "content": "hi"}], [])
    assert raised.value.code == code
    assert len(seen) == attempts


async def test_an_unreachable_endpoint_is_unavailable() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    model, _ = _model(refuse, retries=0)
    with pytest.raises(ModelUnavailable) as raised:
        await model.complete([{"role": "user", "content": "hi"}], [])
    assert raised.value.code == "model_unavailable"


async def test_a_timeout_is_named() -> None:
    def slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("slow", request=request)

    model, _ = _model(slow, retries=0)
    with pytest.raises(ModelUnavailable) as raised:
        await model.complete([{"role": "user", "content": "hi"}], [])
    assert raised.value.code == "model_timeout"
