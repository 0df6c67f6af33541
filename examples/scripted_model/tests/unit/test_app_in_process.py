"""The app without a process: admin routes exist only when allowed."""

from __future__ import annotations

import httpx
from signoff_scripted_model.app import create_app
from signoff_scripted_model.settings import Settings


async def test_without_admin_only_the_api_is_served() -> None:
    app = create_app(Settings(allow_admin=False, script="say:ready"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://model") as http:
        admin = await http.get("/_admin/requests")
        completion = await http.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        )

    assert admin.status_code == 404
    assert admin.json()["error"]["type"] == "invalid_request_error"  # OpenAI's shape, even here
    assert completion.json()["choices"][0]["message"]["content"] == "ready"


async def test_a_body_that_is_not_json_is_a_400_and_is_logged() -> None:
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://model") as http:
        refused = await http.post("/v1/chat/completions", content=b"{nope")
        logged = (await http.get("/_admin/requests")).json()["items"]

    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "The request body must be a JSON object."
    assert [(item["body"], item["status"]) for item in logged] == [("{nope", 400)]


async def test_admin_body_errors_are_openai_errors() -> None:
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://model") as http:
        refused = await http.post("/_admin/faults", json={"mode": "sideways"})

    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "mode"
