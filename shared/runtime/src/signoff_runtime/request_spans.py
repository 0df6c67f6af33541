"""A server span for each HTTP request, named by the route it matched; its traceparent answered.

This is what FastAPI's OpenTelemetry instrumentation did for signoff, in one ASGI middleware.
That instrumentation loads the instrumentor machinery (``packaging``, ``wrapt``), the ASGI
middleware and the semantic-conventions tables: ≈ 4 MB of each HTTP service's memory (issue 18)
for one span per request. Here the span:

- continues the W3C ``traceparent`` (and ``tracestate``) the caller sent, or starts a trace;
- is named ``METHOD /route/{template}`` once routing has matched (``METHOD`` alone if nothing
  did), so ids never become span names, and carries the stable HTTP attributes
  (``http.request.method``, ``url.path``, ``url.scheme``, ``http.route``,
  ``http.response.status_code``); a 5xx or an exception marks it an error, and an exception is
  recorded on it;
- is current while the app runs, so the request's logs, statements, publishes and outbox rows
  belong to it; the response carries its ``traceparent`` back.

The probes and the scrape (``skip``) make no span.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff_runtime import tracing
from signoff_runtime.http_metrics import route_of

_CARRIED = (b"traceparent", b"tracestate")


class RequestSpans:
    """ASGI middleware: a server span per HTTP request except to the ``skip`` paths."""

    def __init__(
        self,
        app: ASGIApp,
        skip: Iterable[str] = (),
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.app = app
        self.skip = frozenset(skip)
        self.tracer = trace.get_tracer("signoff.http", tracer_provider=tracer_provider)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.skip:
            await self.app(scope, receive, send)
            return
        carried = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name in _CARRIED
        }
        method = str(scope.get("method", "GET"))
        attributes = {
            "http.request.method": method,
            "url.path": str(scope.get("path", "")),
            "url.scheme": str(scope.get("scheme", "http")),
        }
        with self.tracer.start_as_current_span(
            method, tracing.carried(carried), SpanKind.SERVER, attributes
        ) as span:
            traceparent = (tracing.current() or "").encode("latin-1")
            status = 500  # an exception before the response started is answered 500

            async def send_traced(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    if traceparent:
                        headers = [*message.get("headers", []), (b"traceparent", traceparent)]
                        message["headers"] = headers
                await send(message)

            try:
                await self.app(scope, receive, send_traced)
            finally:
                route = route_of(scope)
                if route != "unmatched":
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
