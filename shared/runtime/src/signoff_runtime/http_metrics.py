"""Request metrics of every HTTP service: rate, errors and duration by route template.

The route is the template the request matched (``/v1/proposals/{proposal_id}``), never the path
itself, so ids do not become label values; a request that matched no route is ``unmatched``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_REQUESTS = Counter(
    "signoff_http_requests_total",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "signoff_http_request_seconds",
    "Time to answer an HTTP request (to the end of its body), by method and route template.",
    ["method", "route"],
)


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class RequestMetricsMiddleware:
    """ASGI middleware: count and time every request except those to ``skip`` paths."""

    def __init__(self, app: ASGIApp, skip: Iterable[str] = ()) -> None:
        self.app = app
        self.skip = frozenset(skip)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.skip:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the response started is answered 500

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            method, route = scope.get("method", "GET"), route_of(scope)
            HTTP_REQUESTS.labels(method, route, str(status)).inc()
            HTTP_SECONDS.labels(method, route).observe(time.perf_counter() - started)
