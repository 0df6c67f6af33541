"""A pass-through HTTP proxy that counts what goes through it (the web's calls to an API).

Put between the web and the agent or the proposals service, it sees exactly the requests the
web makes — whatever web version runs — and, in the event streams it relays, the keep-alive
comments. Streaming bodies are relayed as they come, so server-sent events stay live.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from signoff_runtime.testing.processes import free_port

_ID = re.compile(r"/[a-z]+_[0-9A-Za-z]{8,}")
_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"host", b"content-length"}


@dataclass
class CountingProxy:
    target: str
    port: int = field(default_factory=free_port)
    seen: list[tuple[float, str]] = field(default_factory=list)
    keepalives: list[float] = field(default_factory=list)
    _client: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=None), limits=httpx.Limits(max_connections=None)
        )
    )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def counted(self, since: float, until: float) -> Counter[str]:
        return Counter(what for at, what in self.seen if since <= at < until)

    def keepalives_between(self, since: float, until: float) -> int:
        return sum(1 for at in self.keepalives if since <= at < until)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"] + (
            f"?{scope['query_string'].decode()}" if scope["query_string"] else ""
        )
        self.seen.append((time.monotonic(), f"{scope['method']} {_ID.sub('/{id}', scope['path'])}"))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        request = self._client.build_request(
            scope["method"], self.target + path, headers=headers, content=body
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError:  # the service is stopping: what a client would see
            await send({"type": "http.response.start", "status": 502, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            out = [(k.encode(), v.encode()) for k, v in response.headers.items()]
            out = [(k, v) for k, v in out if k.lower() not in _HOP]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": out}
            )
            try:
                async for chunk in response.aiter_raw():
                    now = time.monotonic()
                    self.keepalives += [now] * chunk.count(b": keep-alive")
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError:  # the service stopped mid-stream: end the relayed body
                pass
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    async def start(self) -> asyncio.Task[None]:
        config = uvicorn.Config(self, port=self.port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        for _ in range(200):  # up to 10 s
            if server.started:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the counting proxy did not start")
        self._server = server
        return task

    async def stop(self, task: asyncio.Task[None]) -> None:
        self._server.should_exit = True
        self._server.force_exit = True
        await asyncio.wait({task}, timeout=5)
        await self._client.aclose()
