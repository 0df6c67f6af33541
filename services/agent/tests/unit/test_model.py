"""The openai SDK behind ``ChatModel``: every failure becomes one ``ModelUnavailable`` code.

The SDK runs against an injected transport (no network, no patching); its own bounded retries
are exercised (``max_retries=1``: two attempts).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI
from signoff_agent.model import ModelReply, ModelUnavailable, OpenAIChatModel, ToolCall, _Deferred

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


def test_the_sdk_is_imported_by_the_first_call_not_at_start() -> None:
    """``openai`` imports its whole API's types (≈ 14 MB): an agent that never asks the model
    (streams, reads) does not carry it."""
    code = (
        "import sys\n"
        "from signoff_agent.app import create_app\n"
        "from signoff_agent.model import build_model\n"
        "from signoff_agent.settings import AgentGroup\n"
        "build_model(AgentGroup())\n"
        "print('openai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr


async def test_the_deferred_model_is_built_once_at_its_first_call() -> None:
    built: list[OpenAIChatModel] = []

    def build() -> OpenAIChatModel:
        model, _ = _model(lambda _: httpx2.Response(200, json=_completion(_TEXT)))
        built.append(model)
        return model

    deferred = _Deferred(build)
    assert built == []
    for _ in range(2):
        assert await deferred.complete([{"role": "user", "content": "hi"}], []) == ModelReply("ok")
    assert len(built) == 1


_TEXT = {"role": "assistant", "content": "ok"}
