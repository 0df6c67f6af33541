"""One trace context from the conversation turn to the outcome (W3C ``traceparent``).

An HTTP request's ``traceparent`` header is accepted (or a fresh one started), bound into
structlog's context variables (``trace_id`` on every log line) and sent back on the response.
Every message a service publishes carries it as a ``traceparent`` header — FastStream publishes
through ``TraceMiddleware``, outbox rows store it in their ``headers`` — and every consumer binds
it again before its handler runs. No OpenTelemetry SDK is needed for this: the ids are the W3C
format, so a collector configured later continues the same traces.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import structlog
from faststream import BaseMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "traceparent"
_FORMAT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_current: ContextVar[str | None] = ContextVar("signoff_traceparent", default=None)


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a well-formed ``traceparent`` (all-zero ids are invalid), else ``None``."""
    match = _FORMAT.match(traceparent or "")
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(1)


def start() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def current() -> str | None:
    return _current.get()


def headers() -> dict[str, str]:
    """The headers that carry the current trace onwards (empty outside a trace)."""
    value = _current.get()
    return {HEADER: value} if value else {}


@contextlib.contextmanager
def bound(traceparent: str | None) -> Iterator[str | None]:
    """Bind ``traceparent`` (if valid) for the duration of the block, logs included."""
    trace = trace_id(traceparent)
    if trace is None:
        yield None
        return
    token = _current.set(traceparent)
    try:
        with structlog.contextvars.bound_contextvars(trace_id=trace):
            yield traceparent
    finally:
        _current.reset(token)


class HttpTraceMiddleware:
    """ASGI middleware: accept or start a trace per request and answer with it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(HEADER.encode(), b"").decode("latin-1")
        value = sent if trace_id(sent) else start()

        async def send_with_trace(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (HEADER.encode(), value.encode())]
            await send(message)

        with bound(value):
            await self.app(scope, receive, send_with_trace)


class TraceMiddleware(BaseMiddleware):
    """FastStream middleware: add the current trace to every publish (request-reply included)
    and bind an incoming message's trace while its handler runs."""

    async def consume_scope(self, call_next: Any, msg: Any) -> Any:
        with bound((msg.headers or {}).get(HEADER)):
            return await call_next(msg)

    async def publish_scope(self, call_next: Any, cmd: Any) -> Any:
        value = _current.get()
        if value and HEADER not in (cmd.headers or {}):
            cmd.headers = {**(cmd.headers or {}), HEADER: value}
        return await call_next(cmd)
