"""A webhook receiver and an SMTP server for the notification tests, both on local sockets.

``Receiver`` is what a subscriber runs: it checks each POST's ``Signoff-Signature`` with the
secret it was shown (``signing.verify``), records what it got, and answers what the test says
(``answer``: 200, a failure, or nothing yet — a bound socket that does not listen refuses
connections, like an endpoint that is down). ``Mailbox`` is ``aiosmtpd``'s controller keeping
every message it accepts.
"""

from __future__ import annotations

import asyncio
import email
import json
import socket
import time
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import uvicorn
from aiosmtpd.controller import Controller
from signoff_proposals.notifications import signing
from signoff_runtime.testing import wait_until
from starlette.requests import Request
from starlette.responses import Response


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    secret: str = ""
    status: int = 200
    got: list[Received] = field(default_factory=list)
    sock: socket.socket = field(default_factory=lambda: _bound())
    server: uvicorn.Server | None = None
    task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        body = await request.body()
        header = request.headers.get(signing.HEADER, "")
        verified = bool(self.secret) and signing.verify(self.secret, header, body, time.time())
        self.got.append(Received(request.url.path, dict(request.headers), body, verified))
        await Response(status_code=self.status)(scope, receive, send)

    async def start(self) -> None:
        config = uvicorn.Config(self, log_config=None, lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        server = self.server
        await wait_until(lambda: _started(server), timeout=10, what="the receiver to listen")

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await self.task
        self.sock.close()


async def _started(server: uvicorn.Server) -> bool:
    return server.started


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Mail:
    recipients: list[str]
    message: Message


class _Keep:
    def __init__(self) -> None:
        self.mails: list[Mail] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content = envelope.content if isinstance(envelope.content, bytes) else b""
        self.mails.append(Mail(list(envelope.rcpt_tos), email.message_from_bytes(content)))
        return "250 OK"


class Mailbox:
    def __init__(self, port: int) -> None:
        self.keep = _Keep()
        self.controller = Controller(self.keep, hostname="127.0.0.1", port=port)

    @property
    def mails(self) -> list[Mail]:
        return self.keep.mails

    def __enter__(self) -> Mailbox:
        self.controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.controller.stop()
