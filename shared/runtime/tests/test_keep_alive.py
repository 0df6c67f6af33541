"""A service keeps an idle connection open longer than its callers keep one in their pools.

With uvicorn's default (5 s) and httpx's (5 s) equal, a caller could send a request down a
connection the service was closing at that moment: the request failed with "server
disconnected" (one way the web's home page can come up without the agent's resources, as it
once did in CI; that run left no log to tell).
"""

from __future__ import annotations

import asyncio

import httpx
import uvicorn
from fastapi import FastAPI
from signoff_runtime.http import KEEP_ALIVE_S, server_options
from signoff_runtime.testing.processes import free_port
from signoff_runtime.testing.waiting import wait_until

#: longer than uvicorn's own default keep-alive (5 s): a connection idle this long is closed there
IDLE_S = 6.0


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    return app


def _local_end(response: httpx.Response) -> object:
    return response.extensions["network_stream"].get_extra_info("client_addr")


async def test_an_idle_connection_outlives_a_callers_pool_expiry() -> None:
    assert KEEP_ALIVE_S > IDLE_S
    port = free_port()
    config = uvicorn.Config(_app(), host="127.0.0.1", port=port, **server_options(graceful_s=1))
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            return server.started

        await wait_until(started, timeout=10, what="the server listening")
        # the caller's pool keeps connections longer than the idle time: only the server ends one
        limits = httpx.Limits(keepalive_expiry=IDLE_S * 10)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as http:
            first = await http.get("/ping")
            used = _local_end(first)
            await asyncio.sleep(IDLE_S)  # the idle time is what is tested
            second = await http.get("/ping")
            reused = _local_end(second)
        assert first.status_code == second.status_code == 200
        assert used == reused  # the same connection, still open
    finally:
        server.should_exit = True
        await serving
