"""A TCP proxy to PostgreSQL that loses the answer to one COMMIT — after the server committed.

Armed with a marker (bytes a transaction is sure to send, such as an idempotency key), it lets
the connection that sent the marker deliver its next ``COMMIT`` to the server, waits for the
server's answer, and then closes both sides instead of forwarding it: exactly the "connection
lost during COMMIT" case, on the side where the commit did land.
"""

from __future__ import annotations

import asyncio
import contextlib


class CommitDropper:
    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._marker: bytes | None = None
        self._server: asyncio.Server | None = None
        self.port = 0
        self.dropped = 0

    def arm(self, marker: str) -> None:
        self._marker = marker.encode()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self._upstream)
        state = {"marked": False, "cut": False}

        async def upstream() -> None:
            while data := await client_r.read(65536):
                if self._marker is not None and self._marker in data:
                    state["marked"] = True
                if state["marked"] and self._marker is not None and b"COMMIT" in data:
                    self._marker = None
                    state["cut"] = True
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(65536):
                if state["cut"]:
                    self.dropped += 1
                    return  # the server answered the COMMIT; the client never hears it
                client_w.write(data)
                await client_w.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for writer in (client_w, server_w):
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
