"""A minimal keep-alive HTTP/1.1 client for the load driver.

The driver runs on the same two cores as what it measures, so its own cost is kept small and
identical for every side: one connection per concurrent worker, requests written by hand,
responses read by ``Content-Length`` (every server measured here sends one). A connection idle
longer than ``STALE_S`` is opened again before it is used: uvicorn closes an idle keep-alive
connection after five seconds, and a request written into one it is closing comes back as an
``IncompleteReadError`` (the soak's driver met twenty of them after a latency spike).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

#: below uvicorn's ``timeout_keep_alive`` (5 s): an older idle connection is not reused
STALE_S = 4.0


class HttpError(Exception):
    pass


class Connection:
    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._used = 0.0

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self._writer is not None and time.monotonic() - self._used > STALE_S:
            await self.close()
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n{self._headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self._writer.write(head.encode() + body)
        lines = (await self._reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length: int | None = None
        closing = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                closing = True
        if length is None:
            raise HttpError(f"{method} {path}: response without Content-Length")
        payload = await self._reader.readexactly(length)
        self._used = time.monotonic()
        if closing:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
