"""Which script answers: the admin override, else ``scripted:<name>``, else the default."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from signoff_scripted_model.testing import ModelAdmin

pytestmark = pytest.mark.e2e

HELLO: Any = [{"role": "user", "content": "hello"}]


async def _text(client: openai.AsyncOpenAI, model: str) -> str | None:
    completion = await client.chat.completions.create(model=model, messages=HELLO)
    return completion.choices[0].message.content


async def test_model_name_selects_the_script(client: openai.AsyncOpenAI) -> None:
    assert await _text(client, "scripted:say:from the model name") == "from the model name"
    assert await _text(client, "scripted:echo") == "hello"


async def test_plain_model_names_get_the_default_script(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    assert await _text(client, "gpt-4o") == "hello"  # the session server's default: echo

    [logged] = await admin.requests()
    assert logged["script"] == "echo"


async def test_admin_override_beats_the_model_name_until_cleared(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    await admin.force_script("say:forced")
    assert await _text(client, "scripted:echo") == "forced"
    assert await _text(client, "gpt-4o") == "forced"

    await admin.force_script(None)
    assert await _text(client, "scripted:echo") == "hello"


async def test_reset_clears_the_override(client: openai.AsyncOpenAI, admin: ModelAdmin) -> None:
    await admin.force_script("say:forced")
    await admin.reset()

    assert await _text(client, "gpt-4o") == "hello"


async def test_unknown_script_is_an_unknown_model(
    client: openai.AsyncOpenAI, admin: ModelAdmin
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await _text(client, "scripted:no.such.script")

    assert caught.value.code == "model_not_found"
    response = await admin.http.post("/_admin/script", json={"script": "no.such.script"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_script"
