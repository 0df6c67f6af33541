"""Each fault as the openai SDK surfaces it (``max_retries=0`` unless a test says otherwise).

These are the facts the agent's model loop must handle — the garbage ones especially: the
SDK does NOT turn them into an ``openai.APIError`` unless the client was built with
``_strict_response_validation=True``.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from signoff_scripted_model.testing import ModelAdmin, RunningModelServer

pytestmark = pytest.mark.e2e

HI: Any = [{"role": "user", "content": "hi"}]


async def _ask(client: openai.AsyncOpenAI, stream: bool = False) -> Any:
    """One request; a stream is read to the end."""
    if not stream:
        return await client.chat.completions.create(model="m", messages=HI)
    chunks = await client.chat.completions.create(model="m", messages=HI, stream=True)
    return [chunk async for chunk in chunks]


@pytest.mark.parametrize("stream", [False, True])
async def test_down_is_a_503(client: openai.AsyncOpenAI, admin: ModelAdmin, stream: bool) -> None:
    await admin.set_fault("down")

    with pytest.raises(openai.InternalServerError) as caught:
        await _ask(client, stream)

    assert caught.value.status_code == 503
    assert isinstance(caught.value, openai.APIStatusError)


@pytest.mark.parametrize("stream", [False, True])
async def test_server_error_is_a_500(
    client: openai.AsyncOpenAI, admin: ModelAdmin, stream: bool
) -> None:
    await admin.set_fault("server_error")

    with pytest.raises(openai.InternalServerError) as caught:
        await _ask(client, stream)

    assert caught.value.status_code == 500


@pytest.mark.parametrize("stream", [False, True])
async def test_rate_limited_is_a_429_with_retry_after(
    client: openai.AsyncOpenAI, admin: ModelAdmin, stream: bool
) -> None:
    await admin.set_fault("rate_limited", retry_after_s=7)

    with pytest.raises(openai.RateLimitError) as caught:
        await _ask(client, stream)

    assert caught.value.status_code == 429
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "7"


@pytest.mark.parametrize("stream", [False, True])
async def test_slow_times_out_in_a_patient_less_client(
    client: openai.AsyncOpenAI, admin: ModelAdmin, stream: bool
) -> None:
    await admin.set_fault("slow", delay_ms=3000)

    with pytest.raises(openai.APITimeoutError):
        await _ask(client.with_options(timeout=0.3), stream)


async def test_slow_answers_a_patient_client(client: openai.AsyncOpenAI, admin: ModelAdmin) -> None:
    await admin.set_fault("slow", delay_ms=200)

    completion = await _ask(client.with_options(timeout=5))

    assert completion.choices[0].message.content == "hi"


@pytest.mark.parametrize("stream", [False, True])
async def test_truncated_garbage_raises_a_plain_json_error(
    client: openai.AsyncOpenAI, admin: ModelAdmin, stream: bool
) -> None:
    await admin.set_fault("garbage", garbage="truncated")

    with pytest.raises(json.JSONDecodeError):  # not an openai.APIError
        await _ask(client, stream)


async def test_html_garbage_comes_back_as_a_str(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.set_fault("garbage", garbage="html", count=2)

    assert isinstance(await _ask(client), str)  # typed ChatCompletion, really the page text
    assert await _ask(client, stream=True) == []  # no events: an empty stream, no error


async def test_wrong_shape_garbage_is_a_completion_without_choices(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.set_fault("garbage", garbage="wrong_shape", count=2)

    completion = await _ask(client)
    [chunk] = await _ask(client, stream=True)

    assert isinstance(completion, ChatCompletion) and completion.choices is None
    assert chunk.choices is None


@pytest.mark.parametrize("garbage", ["html", "wrong_shape"])
async def test_strict_response_validation_turns_garbage_into_an_api_error(
    model_server: RunningModelServer, admin: ModelAdmin, garbage: str
) -> None:
    await admin.set_fault("garbage", garbage=garbage)
    strict = openai.AsyncOpenAI(
        base_url=model_server.base_url, api_key="x", max_retries=0, _strict_response_validation=True
    )

    with pytest.raises(openai.APIResponseValidationError):
        await _ask(strict)
    await strict.close()


async def test_count_strikes_that_many_requests_then_recovers(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.set_fault("down", count=2)

    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await _ask(client)
    assert (await _ask(client)).choices[0].message.content == "hi"

    assert [(r["fault"], r["status"]) for r in await admin.requests()] == [
        ("down", 503),
        ("down", 503),
        (None, 200),
    ]


async def test_count_null_strikes_until_cleared(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.set_fault("server_error", count=None)
    for _ in range(3):
        with pytest.raises(openai.InternalServerError):
            await _ask(client)
    assert (await admin.faults())["injected"] == 3

    await admin.set_fault(None)

    assert (await _ask(client)).choices[0].message.content == "hi"


async def test_the_sdk_retry_gets_past_one_outage(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.set_fault("down", count=1)

    completion = await _ask(client.with_options(max_retries=1))

    assert completion.choices[0].message.content == "hi"
    assert [r["status"] for r in await admin.requests()] == [503, 200]
