"""A bare HTTP/1.1 server on ``asyncio.start_server``: keep-alive, ``Content-Length`` bodies.

Enough for the benchmark's approve requests and health checks; nothing else is parsed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)

Handler = Callable[[str, str, bytes], Awaitable[tuple[int, bytes]]]
_REASONS = {200: b"OK", 404: b"Not Found", 409: b"Conflict", 500: b"Internal Server Error"}


async def serve(handler: Handler, port: int, *, reuse_port: bool = False) -> asyncio.Server:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                method, path, _ = lines[0].decode("latin-1").split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                try:
                    status, payload = await handler(method, path, body)
                except Exception:  # a failed request answers 500 and the connection lives on
                    log.exception("http.failed", method=method, path=path)
                    status, payload = 500, b'{"error":"internal"}'
                writer.write(
                    b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n"
                    % (status, _REASONS.get(status, b"?"), len(payload))
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(client, "127.0.0.1", port, reuse_port=reuse_port)
