"""Bounds on what one caller may make a service do: body sizes and per-person request rates.

Both are plain ASGI middleware, so they run before FastAPI parses anything. A body over
``SIGNOFF_LIMITS__MAX_BODY_BYTES`` is refused with ``413 payload_too_large`` without being read
further. Approval and message requests are counted per person (the verified token's ``sub``) in an
in-process token bucket: the limit is *per process*, so N replicas allow N times the rate — it
protects a process from one person's flood, it is not a global quota (the proposals service's
per-conversation and per-organization quotas are). A request whose token does not verify is not
counted; the route answers it ``401``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from signoff_runtime.audiences import AGENT_AUDIENCE, PROPOSALS_AUDIENCE
from signoff_runtime.problems import MEDIA_TYPE, Problem
from signoff_runtime.settings import AuthSettings, LimitsSettings

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


#: which requests count as what: (method, path pattern, bucket name)
RATED: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"^/v1/proposals/[^/]+/(approve|decline|revise)$"), "approvals"),
    ("POST", re.compile(r"^/v1/pause-points/[^/]+/resolve$"), "approvals"),
    ("POST", re.compile(r"^/v1/conversations/[^/]+/messages$"), "messages"),
)
#: the API (token audience) each bucket's routes belong to
AUDIENCE = {"approvals": PROPOSALS_AUDIENCE, "messages": AGENT_AUDIENCE}


async def _send_problem(send: Send, problem: Problem, headers: dict[str, str]) -> None:
    body = json.dumps(problem.body()).encode()
    raw = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": problem.status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Refuse a request body over ``max_bytes`` (by its ``Content-Length``, or while streaming)
    and one whose text holds a NUL character (``422 invalid_request``): PostgreSQL's text and
    jsonb cannot store one, so it would otherwise fail deep inside a handler. Both hold for every
    body whatever its ``Content-Type`` says (``holds_nul``)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = Problem(
            413, "payload_too_large", "The request body is too large.", max_bytes=self.max_bytes
        )
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _send_problem(send, too_large, {})
            return
        # read it all (it is bounded), counting, then replay it to the app
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                await _send_problem(send, too_large, {})
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if holds_nul(body, headers.get(b"content-type", b"")):
            await _send_problem(
                send,
                Problem(422, "invalid_request", "Text in the request may not hold NUL characters."),
                {},
            )
            return
        replayed = {"type": "http.request", "body": body, "more_body": False}
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return replayed
            return await receive()

        await self.app(scope, replay, send)


#: ``\u0000`` as a JSON escape: preceded by an even number of backslashes (``\\u0000`` is
#: the six characters ``\u0000`` of ordinary text)
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def holds_nul(body: bytes, content_type: bytes = b"") -> bool:
    """Whether a body carries a NUL character in any form a handler could decode, whatever its
    ``Content-Type`` says: FastAPI parses a body with no type, or ``APPLICATION/JSON``, as JSON,
    and Starlette a mis-cased form type as a form, so the type only narrows what is *not* checked.

    A raw NUL byte and a JSON ``\\u0000`` escape are refused in every body (outside a JSON string
    a backslash is not JSON, so the escape can only be a string's). A percent-encoded ``%00`` is
    refused unless the body is declared JSON (JSON is never percent-decoded, and ``"%00"`` is
    ordinary text in it).
    """
    if b"\x00" in body:
        return True
    if b"u0000" in body and _JSON_NUL.search(body) is not None:
        return True
    return b"%00" in body and not _is_json(content_type)


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


@dataclass
class TokenBuckets:
    """``rate`` requests per minute per key, with a burst of ``rate``; ``clock`` is monotonic."""

    rate: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    def peek(self, key: str) -> float:
        """What ``take`` would answer, taking nothing (to count only failures, say)."""
        now = self.clock()
        tokens, last = self._buckets.get(key, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - last) * self.rate / 60.0)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) * 60.0 / self.rate

    def take(self, key: str) -> float:
        """0 if allowed now, else the seconds until one request would be."""
        now = self.clock()
        tokens, last = self._buckets.get(key, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - last) * self.rate / 60.0)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > 100_000:  # bounded memory: forget the oldest half
            for stale in sorted(self._buckets, key=lambda k: self._buckets[k][1])[:50_000]:
                del self._buckets[stale]
        return (1.0 - tokens) * 60.0 / self.rate


class RateLimitMiddleware:
    """``429 rate_limited`` with ``Retry-After`` once a person exceeds a bucket's rate."""

    def __init__(self, app: Any, auth: AuthSettings, limits: LimitsSettings) -> None:
        self.app = app
        self.auth = auth
        self.buckets = {
            "approvals": TokenBuckets(limits.approvals_per_minute),
            "messages": TokenBuckets(limits.messages_per_minute),
        }

    def _bucket(self, scope: Scope) -> str | None:
        for method, pattern, name in RATED:
            if scope.get("method") == method and pattern.match(scope.get("path", "")):
                return name
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = self._bucket(scope) if scope["type"] == "http" else None
        if name is not None:
            # loaded by the first rated request: a service with no rated route checks no token
            # and need not hold PyJWT and cryptography (``audiences``)
            from signoff_runtime.tokens import TokenInvalid, bearer, verify_token_async

            header = dict(scope.get("headers") or []).get(b"authorization")
            try:
                token = bearer(header.decode() if header else None)
                claims = await verify_token_async(self.auth, token, audience=AUDIENCE[name])
            except TokenInvalid:
                claims = None  # the route answers 401
            if claims is not None:
                wait = self.buckets[name].take(f"{claims.org}/{claims.sub}")
                if wait > 0:
                    retry = str(max(1, math.ceil(wait)))
                    problem = Problem(
                        429, "rate_limited", "Too many requests; try again later.", bucket=name
                    )
                    await _send_problem(send, problem, {"Retry-After": retry})
                    return
        await self.app(scope, receive, send)


def install(app: Any, auth: AuthSettings, limits: LimitsSettings) -> None:
    """Add both middlewares (the body limit outermost, so nothing reads an oversized body)."""
    app.add_middleware(RateLimitMiddleware, auth=auth, limits=limits)
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
