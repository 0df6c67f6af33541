"""Errors reach HTTP clients as problem documents: a database that cannot serve right now is a
``503`` worth retrying, anything else a ``500`` that carries a correlation id and nothing more."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from signoff_runtime.db import create_engine
from signoff_runtime.problems import install
from signoff_runtime.settings import DatabaseSettings
from sqlalchemy import text
from structlog.testing import capture_logs


def _app(database_url: str) -> FastAPI:
    app = FastAPI()
    install(app)
    slow = create_engine(DatabaseSettings(url=database_url, statement_timeout_ms=100))
    tiny = create_engine(DatabaseSettings(url=database_url, pool_size=1))
    tiny.pool._timeout = 0.2  # type: ignore[attr-defined]  # wait briefly for the one connection

    @app.get("/slow")
    async def _slow() -> dict[str, str]:
        async with slow.connect() as conn:
            await conn.execute(text("SELECT pg_sleep(2)"))
        return {}

    @app.get("/exhausted")
    async def _exhausted() -> dict[str, str]:
        async with tiny.connect() as held, tiny.connect() as _:
            await held.execute(text("SELECT 1"))
        return {}

    @app.get("/bug")
    async def _bug() -> dict[str, str]:
        raise ValueError("SELECT secret FROM internals")

    return app


@pytest.fixture
async def client(database_url: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=_app(database_url), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


@pytest.mark.parametrize("path", ["/slow", "/exhausted"])
async def test_a_database_that_cannot_serve_now_is_a_503_with_retry_after(
    client: httpx.AsyncClient, path: str
) -> None:
    with capture_logs() as logs:
        response = await client.get(path)
    assert response.status_code == 503, response.text
    [logged] = [e for e in logs if e["event"] == "http.database_unavailable"]
    assert response.headers["retry-after"] == "1"
    body = response.json()
    assert body["code"] == "temporarily_unavailable"
    assert body["correlation_id"].startswith("cor_")
    assert logged["correlation_id"] == body["correlation_id"]  # the log says what happened


async def test_anything_else_is_a_500_that_says_nothing_internal(client: httpx.AsyncClient) -> None:
    with capture_logs() as logs:
        response = await client.get("/bug")
    assert response.status_code == 500
    assert [e["event"] for e in logs] == ["http.unhandled"]
    assert response.json()["code"] == "internal_error"
    assert "SELECT" not in response.text and "Traceback" not in response.text
