"""Each HTTP request is one server span named by its route template, continuing the caller's
trace and answering with its own ``traceparent``; probes make none, and FastAPI makes none of its
own."""

from __future__ import annotations

import secrets

import httpx
from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from signoff_runtime import tracing


def _traced() -> tuple[FastAPI, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # FastAPI's own telemetry is on for this provider, as it is in a service for the global one
    app = FastAPI(telemetry={"tracer_provider": provider})

    @app.get("/v1/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str | None]:
        return {"id": thing_id, "inside": tracing.current()}

    @app.get("/v1/broken")
    async def broken() -> None:
        raise RuntimeError("a bug")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    tracing.instrument_app(app, skip={"/healthz"}, tracer_provider=provider)
    return app, exporter


async def test_a_request_continues_the_callers_trace_under_its_route_template() -> None:
    app, exporter = _traced()
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        answered = await c.get(
            "/v1/things/t-1", headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}
        )
    [span] = exporter.get_finished_spans()
    assert span.name == "GET /v1/things/{thing_id}"
    assert span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None and format(span.parent.span_id, "016x") == parent_id
    assert dict(span.attributes or {}) == {
        "http.request.method": "GET",
        "url.path": "/v1/things/t-1",
        "url.scheme": "http",
        "http.route": "/v1/things/{thing_id}",
        "http.response.status_code": 200,
    }
    mine = f"00-{trace_id}-{format(span.context.span_id, '016x')}-01"
    assert answered.headers["traceparent"] == mine
    # the request's span is current while the route runs (no span of FastAPI's own under it)
    assert answered.json()["inside"] == mine


async def test_no_route_no_template_an_error_is_marked_and_probes_make_no_span() -> None:
    app, exporter = _traced()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://s") as c:
        assert (await c.get("/healthz")).status_code == 200
        missing = await c.get("/v1/nothing/here")
        assert (await c.get("/v1/broken")).status_code == 500
    unmatched, failed = exporter.get_finished_spans()
    assert unmatched.name == "GET" and "http.route" not in (unmatched.attributes or {})
    assert (unmatched.attributes or {})["http.response.status_code"] == 404
    assert tracing.trace_id(missing.headers["traceparent"]) == format(
        unmatched.context.trace_id, "032x"
    ), "a trace of its own, started here"
    assert failed.name == "GET /v1/broken"
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]
