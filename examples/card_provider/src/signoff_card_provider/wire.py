"""Dropping a response for real: the refund lands, the caller gets no HTTP answer at all.

A ``drop_response`` fault must look, to the client, exactly like a provider that applied the
refund and then lost the connection: the socket closes with zero bytes of response, so httpx
raises ``RemoteProtocolError`` ("Server disconnected without sending a response") or
``ReadError`` (reset). A 500 would not do — it *is* an answer.

An ASGI app never sees its socket, so this takes two small pieces:

* ``DroppableH11Protocol`` is uvicorn's own h11 protocol, unchanged except that every
  request's scope carries ``scope[ABORT_KEY]``, a callable aborting this connection's
  transport. uvicorn accepts a protocol class as ``Config(http=...)``, so the server,
  its parsing and its keep-alive handling stay uvicorn's.
* ``DropResponseMiddleware``: when a route has called ``request_drop(scope)``, the response
  start is never sent; the transport is aborted instead, and the middleware waits for
  uvicorn to see the disconnect, so uvicorn neither writes a fallback 500 nor logs an error.

Rejected: raising after ``http.response.start`` (the status line has gone out: a response,
plus a logged traceback); reaching ``send.__self__.transport`` (a private attribute of a
private class); an HTTP/1.1 server of our own (more code to get right than this).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

ABORT_KEY = "signoff.abort_connection"
DROP_KEY = "signoff.drop_response"
_DISCONNECT_WAIT_S = 5.0


class DroppableH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, offering each request a way to abort its connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        inner = self.app

        async def app_offering_abort(scope: Any, receive: Any, send: Any) -> None:
            scope[ABORT_KEY] = self._abort
            await inner(scope, receive, send)

        self.app = app_offering_abort

    def _abort(self) -> None:
        self.transport.abort()


class _DropSignal:
    """Set by the route, read by the middleware; an object so scope copies still share it."""

    def __init__(self) -> None:
        self.requested = False


def can_drop(scope: Scope) -> bool:
    """Whether this request is served in a way that can drop its response."""
    return callable(scope.get(ABORT_KEY)) and isinstance(scope.get(DROP_KEY), _DropSignal)


def request_drop(scope: Scope) -> None:
    """Ask the middleware to drop, not send, this request's response."""
    signal = scope.get(DROP_KEY)
    if not isinstance(signal, _DropSignal):
        raise RuntimeError("DropResponseMiddleware is not installed")
    signal.requested = True


class DropResponseMiddleware:
    """Abort the connection instead of sending a response a route asked to drop."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        signal = _DropSignal()
        scope[DROP_KEY] = signal
        dropped = False

        async def send_or_drop(message: Message) -> None:
            nonlocal dropped
            if not dropped and signal.requested and message["type"] == "http.response.start":
                dropped = True
                await _abort_and_wait(scope[ABORT_KEY], receive)
            if not dropped:
                await send(message)

        await self.app(scope, receive, send_or_drop)


async def _abort_and_wait(abort: Callable[[], None], receive: Receive) -> None:
    """Abort, then wait (bounded) until uvicorn reports the disconnect to this request."""
    abort()
    try:
        async with asyncio.timeout(_DISCONNECT_WAIT_S):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return
