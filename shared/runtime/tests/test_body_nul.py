"""A request body whose text holds a NUL character is a 422 before any handler runs."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from signoff_runtime.limits import BodyLimitMiddleware, holds_nul


@pytest.mark.parametrize(
    ("body", "content_type", "refused"),
    [
        (b'{"a": "x\\u0000y"}', b"application/json", True),
        (b'{"a": "x\\\\\\u0000y"}', b"application/json", True),  # \\ then the escape
        (b'{"a": "x\\\\u0000y"}', b"application/json", False),  # the text \u0000
        (b'{"a": "plain"}', b"application/json", False),
        (b"reason=a%00b", b"application/x-www-form-urlencoded", True),
        (b"reason=a%2500b", b"application/x-www-form-urlencoded", False),
        (b"raw\x00bytes", b"application/octet-stream", True),
        # whatever the type says: FastAPI parses an undeclared or capitalised JSON body as JSON
        (b'{"a": "x\\u0000y"}', b"APPLICATION/JSON", True),
        (b'{"a": "x\\u0000y"}', b"", True),
        (b'{"a": "x\\u0000y"}', b"text/plain", True),
        (b"reason=a%00b", b"Application/X-WWW-Form-Urlencoded; charset=utf-8", True),
        (b"reason=a%00b", b"text/plain", True),
        (b"raw\x00text", b"text/plain", True),
        # a JSON body is never percent-decoded: "%00" in it is text
        (b'{"a": "50%00"}', b"application/json", False),
        (b'{"a": "50%00"}', b"application/problem+json; charset=utf-8", False),
    ],
)
def test_holds_nul(body: bytes, content_type: bytes, refused: bool) -> None:
    assert holds_nul(body, content_type) is refused


async def test_the_middleware_answers_422_and_the_handler_never_runs() -> None:
    app = FastAPI()
    app.add_middleware(BodyLimitMiddleware, max_bytes=10_000)
    reached: list[object] = []

    @app.post("/echo")
    async def echo(body: dict[str, str]) -> dict[str, str]:
        reached.append(body)
        return body

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        refused = await client.post(
            "/echo", content=b'{"a": "x\\u0000"}', headers={"content-type": "application/json"}
        )
        fine = await client.post("/echo", json={"a": "x\\u0000"})
        big = await client.post("/echo", json={"a": "x" * 20_000})
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_request"
    assert fine.status_code == 200 and fine.json() == {"a": "x\\u0000"}
    assert big.status_code == 413
    assert reached == [{"a": "x\\u0000"}]
