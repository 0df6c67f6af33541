"""One peer process: ``POST /v1/proposals/{id}/start`` runs the graph to its interrupt;
``POST /v1/proposals/{id}/approve`` resumes it and answers once the graph has finished.

Several processes share the serving port (``SO_REUSEPORT``); each answers health checks on a
port of its own so the harness can tell that every one of them is up.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

from langgraph.types import Command
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from signoff_bench.peer.graph import build
from signoff_bench.raw import httpd

_ROUTE = re.compile(r"^/v1/proposals/([^/]+)/(start|approve)$")


async def main() -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        os.environ["BENCH_PEER_DSN"],
        min_size=1,
        max_size=int(os.environ.get("BENCH_PEER_POOL", "10")),
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
    )
    await pool.open()
    graph = build(pool)

    async def handle(method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if method == "GET" and path == "/healthz":
            return 200, b'{"status":"ok"}'
        match = _ROUTE.match(path)
        if method != "POST" or match is None:
            return 404, b"{}"
        thread_id, action = match.groups()
        config = {"configurable": {"thread_id": thread_id}}
        if action == "start":
            draft = json.loads(body)
            await graph.ainvoke({**draft, "thread_id": thread_id}, config)
            return 200, b'{"result":"waiting"}'
        state = await graph.ainvoke(Command(resume={"approved": True}), config)
        if not state.get("applied"):
            return 409, b'{"result":"not_applied"}'
        return 200, b'{"result":"applied"}'

    shared = await httpd.serve(handle, int(os.environ["BENCH_PEER_PORT"]), reuse_port=True)
    health = await httpd.serve(handle, int(os.environ["BENCH_PEER_HEALTH_PORT"]))
    async with shared, health, pool:
        await asyncio.gather(shared.serve_forever(), health.serve_forever())
