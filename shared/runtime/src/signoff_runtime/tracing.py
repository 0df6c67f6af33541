"""One trace from a person's turn (or a propose call) to the outcome's hand-back: OpenTelemetry.

Every process installs the SDK's tracer provider at start (``configure``), named
``signoff-<service>``. Spans are made whether or not they are exported — their ids are real and
every log line carries ``trace_id``/``span_id`` — but nothing leaves the process unless the
standard variable ``OTEL_TRACES_EXPORTER`` names an exporter: ``otlp`` (OTLP over HTTP, set up by
the standard ``OTEL_EXPORTER_OTLP_*`` variables; compose points it at Jaeger), ``console``, or
``jsonl`` (one compact JSON line per span, nanosecond times, into a file of each process's own in
the folder ``SIGNOFF_TRACES_DIR``: what ``make timeline`` reads). ``OTEL_SDK_DISABLED=true`` turns
spans off altogether (the API's no-op).

Where the spans come from:

- **HTTP requests** — ``instrument_app`` (``signoff_runtime.request_spans``): a server span per
  request, named by its route template, continuing a W3C ``traceparent`` the caller sent; the
  response carries the request's ``traceparent`` back. (FastAPI's instrumentation did this once;
  it cost ≈ 4 MB of each service's memory.)
- **Messages** — ``broker_middlewares`` (``signoff_runtime.message_spans``): when exporting, a
  consumer span ``<queue> process`` per message, a child of the ``traceparent`` the message
  carries, current while its handler runs; when not, no span: the handler runs in the context the
  message carried (its log lines name the sender's span), which goes on unchanged, so a trace
  that continues in a process that exports stays whole. Every FastStream publish (replies
  included) carries the current context unless it names a ``traceparent`` of its own.
- **Publishes outside FastStream** carry ``headers()``: the request-reply client, and the outbox.
  An outbox row stores the ``traceparent`` of the span that made the state change, so its
  consumer's span is that span's child although the relay publishes it later — the contract
  continues the trace of the proposal it came from (its approval is a request, and a trace, of
  its own), the outcome the executor's, and so on back to the agent's hand-back.
- **Moments inside a span** (``event``): a transaction committed (``unit_of_work``), a contract
  claimed and executed (the executor), and each outbox relay round is a span of its own
  (``relay``: woken, rows selected, published, confirmed, marked sent) naming the message ids it
  carried. An event on a span that is not recorded costs nothing.
- **Statements and outgoing calls**, when exporting by ``otlp`` or ``console``: asyncpg's
  instrumentation (a span per statement) and httpx's (the model's and the providers' calls).
  They are left out when nothing is exported, because they cost on every statement, and with
  ``jsonl``, whose reader times hops, not statements, and must not be slowed by what it reads
  (``SIGNOFF_TRACES_STATEMENTS=1`` adds them there too: a diagnosis, not a measurement).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry import context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette

from signoff_runtime.apps import is_fastapi
from signoff_runtime.message_spans import Propagated, Traced

HEADER = "traceparent"
_FORMAT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_PROPAGATOR = TraceContextTextMapPropagator()
_configured: dict[str, bool] = {}


def configure(service: str) -> None:
    """Install the process's tracer provider (once; the first service name wins in-process)."""
    if _configured or _disabled():
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": f"signoff-{service}"}))
    exporting, statements = _add_exporter(provider, service)
    trace.set_tracer_provider(provider)
    if statements:
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        AsyncPGInstrumentor().instrument()  # type: ignore[no-untyped-call]
        HTTPXClientInstrumentor().instrument()
    _configured["exporting"] = exporting


def exporting() -> bool:
    """Whether spans leave this process (``OTEL_TRACES_EXPORTER`` named an exporter)."""
    return _configured.get("exporting", False)


def _disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _add_exporter(provider: Any, service: str) -> tuple[bool, bool]:
    """Add the exporters ``OTEL_TRACES_EXPORTER`` names: (any added, statements instrumented)."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    names = {n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(",")}
    exporters: list[SpanExporter] = []
    if "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporters.append(OTLPSpanExporter())
    if "console" in names:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporters.append(ConsoleSpanExporter())
    # SIGNOFF_TRACES_STATEMENTS=1: statement spans with jsonl too (a diagnosis, not a measurement)
    statements = bool(exporters) or os.environ.get("SIGNOFF_TRACES_STATEMENTS") == "1"
    if "jsonl" in names:
        exporters.append(_jsonl_exporter(service))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return bool(exporters), statements


def _jsonl_exporter(service: str) -> Any:
    """Spans as JSON lines in ``$SIGNOFF_TRACES_DIR/<service>-<pid>.jsonl`` (one file per
    process, so no two writers share one; written from the batch processor's thread)."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    folder = Path(os.environ.get("SIGNOFF_TRACES_DIR") or ".")
    folder.mkdir(parents=True, exist_ok=True)
    out: IO[str] = (folder / f"{service}-{os.getpid()}.jsonl").open("a", encoding="utf-8")
    return ConsoleSpanExporter(out=out, formatter=span_line)


def span_line(span: Any) -> str:
    """One span as a compact JSON line: ids, name, times (ns since the epoch), its attributes,
    and its events as ``[name, time]`` pairs."""
    ctx = span.get_span_context()
    found = {
        "service": span.resource.attributes.get("service.name"),
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
        "start": span.start_time,
        "end": span.end_time,
        "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
        "events": [[e.name, e.timestamp] for e in span.events],
    }
    return json.dumps(found, separators=(",", ":")) + "\n"


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def flush(timeout_ms: int = 5_000) -> None:
    """Export what is buffered (a stopping service's last spans)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush(timeout_ms)


def broker_middlewares() -> list[Any]:
    """The broker's message tracing (``signoff_runtime.message_spans``): a consumer span per
    message when spans are exported, else only the context carried through (call after
    ``configure``)."""
    return [Traced(trace.get_tracer_provider()) if exporting() else Propagated()]


def instrument_app(
    app: Starlette, skip: Iterable[str] = (), tracer_provider: trace.TracerProvider | None = None
) -> None:
    """A server span per request, named by its route template, and ``traceparent`` on every
    response (``request_spans``); requests to the ``skip`` paths make none.

    FastAPI (since 0.16x) makes telemetry of its own once a tracer provider is set: a second
    server span around ours, and spans for dependency resolution, the endpoint and
    serialization inside it, so that a request's commit events would land on an "endpoint"
    span, not the request's (``make timeline`` reads them there), at a few spans' cost per
    request. It is turned off for an app instrumented here: one span per request, ours."""
    from signoff_runtime.request_spans import RequestSpans  # it reads this module's context

    if is_fastapi(app):
        # the dict FastAPI's telemetry reads on every request (FastAPI(telemetry=...) fills it)
        app._telemetry.update(tracing=False, metrics=False, logs=False)  # type: ignore[attr-defined]
    app.add_middleware(RequestSpans, skip=skip, tracer_provider=tracer_provider)


def event(name: str) -> None:
    """Mark a moment on the current span (a no-op outside a recorded span)."""
    trace.get_current_span().add_event(name)


def headers() -> dict[str, str]:
    """The headers that carry the current span onwards (empty outside a trace)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {HEADER: carrier[HEADER]} if HEADER in carrier else {}


def current() -> str | None:
    """The current span's ``traceparent``, if there is one."""
    return headers().get(HEADER)


def carried(carrier: Mapping[str, str]) -> context.Context:
    """The context that ``traceparent`` (and ``tracestate``) in ``carrier`` continue; the
    current one, unchanged, when they are missing or malformed."""
    return _PROPAGATOR.extract(carrier)


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a well-formed ``traceparent`` (all-zero ids are invalid), else ``None``."""
    match = _FORMAT.match(traceparent or "")
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(1)


def start() -> str:
    """A fresh, sampled ``traceparent`` (a caller starting a trace of its own)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


@contextlib.contextmanager
def bound(traceparent: str | None) -> Iterator[str | None]:
    """Continue ``traceparent`` (if valid) for the block: spans made in it are its children."""
    if trace_id(traceparent) is None:
        yield None
        return
    token = context.attach(_PROPAGATOR.extract({HEADER: str(traceparent)}))
    try:
        yield traceparent
    finally:
        context.detach(token)


def add_trace_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: the current span's trace and span ids on every log line."""
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        event.setdefault("trace_id", format(span.trace_id, "032x"))
        event.setdefault("span_id", format(span.span_id, "016x"))
    return event
