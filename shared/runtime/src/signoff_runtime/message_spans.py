"""What a message's trace needs from FastStream, and no more: a consumer span, a ``traceparent``.

FastStream's own telemetry middleware cost the hot queues ~0.14 ms of CPU per message (issue 18,
``signoff_bench.subscriber``): a "create" span for every message without a parent, a producer
span pair per publish, two duration histograms, baggage parsed twice, eight attributes. Nothing
here reads those; what the system relies on is that a message's handler runs inside a CONSUMER
span that is a child of the ``traceparent`` the message carries (the trace runs on across
services), named ``<queue> process`` with ``messaging.message.id`` (what ``make timeline``
matches), and that every publish carries the current context onwards.

``Traced`` does that. ``Propagated`` is for a process whose spans go nowhere (no exporter): it
makes no span at all, only continues the incoming context — so the ``traceparent`` passes through
unchanged and a trace that goes on in a process that does export stays whole (a span of this
process, never exported, would have left its children pointing at a parent nobody has). A message
that carries no trace starts one, as a span would have: its log lines still share a trace id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faststream import BaseMiddleware
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from faststream._internal.context.repository import ContextRepo
    from faststream.message import StreamMessage
    from faststream.rabbit.response import RabbitPublishCommand
    from opentelemetry.context import Context

HEADER = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()
_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)
_IDS = RandomIdGenerator()


class _Scope(BaseMiddleware[Any, Any]):
    """One message's (or one publish's) middleware; FastStream makes one per use."""

    __slots__ = ()

    async def publish_scope(
        self, call_next: Callable[[RabbitPublishCommand], Awaitable[Any]], cmd: RabbitPublishCommand
    ) -> Any:
        """Carry the current context, unless the caller set a ``traceparent`` of its own (a
        dead-letter copy keeps the original's)."""
        if HEADER not in cmd.headers:
            _PROPAGATOR.inject(cmd.headers)
        return await call_next(cmd)


class Traced:
    """Broker middleware: each delivery's handler runs in a CONSUMER span ``<queue> process``,
    a child of the message's ``traceparent``; an exception escaping it marks the span failed."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)

    def __call__(self, msg: Any, /, *, context: ContextRepo) -> _Traced:
        return _Traced(msg, context=context, tracer=self.tracer)


class _Traced(_Scope):
    __slots__ = ("tracer",)

    def __init__(self, msg: Any, /, *, context: ContextRepo, tracer: trace.Tracer) -> None:
        super().__init__(msg, context=context)
        self.tracer = tracer

    async def consume_scope(
        self, call_next: Callable[[StreamMessage[Any]], Awaitable[Any]], msg: StreamMessage[Any]
    ) -> Any:
        parent = _PROPAGATOR.extract(msg.headers)
        queue = _queue(self.context, msg)
        span = self.tracer.start_span(
            f"{queue} process",
            parent,
            SpanKind.CONSUMER,
            {
                "messaging.system": "rabbitmq",
                "messaging.destination.name": queue,
                "messaging.message.id": msg.message_id,
                "messaging.message.conversation_id": msg.correlation_id,
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            return await call_next(msg)
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            otel_context.detach(token)
            span.end()


class Propagated:
    """Broker middleware for a process that exports no spans: the handler runs in the message's
    own context (a new trace if it carries none); publishes carry it on."""

    def __call__(self, msg: Any, /, *, context: ContextRepo) -> _Propagated:
        return _Propagated(msg, context=context)


class _Propagated(_Scope):
    __slots__ = ()

    async def consume_scope(
        self, call_next: Callable[[StreamMessage[Any]], Awaitable[Any]], msg: StreamMessage[Any]
    ) -> Any:
        token = otel_context.attach(_continued(msg.headers))
        try:
            return await call_next(msg)
        finally:
            otel_context.detach(token)


def _continued(headers: dict[str, Any]) -> Context:
    """The context ``headers`` carry, or a new sampled trace's (ids as the SDK draws them)."""
    if HEADER in headers:
        found = _PROPAGATOR.extract(headers)
        if trace.get_current_span(found).get_span_context().is_valid:
            return found
    started = SpanContext(
        _IDS.generate_trace_id(), _IDS.generate_span_id(), is_remote=True, trace_flags=_SAMPLED
    )
    return trace.set_span_in_context(NonRecordingSpan(started))


def _queue(context: ContextRepo, msg: StreamMessage[Any]) -> str:
    """The name of the queue the subscriber consumes (the routing key if there is none)."""
    queue = getattr(context.get_local("handler_"), "queue", None)
    name = getattr(queue, "name", None)
    return str(name) if name else str(getattr(msg.raw_message, "routing_key", "") or "default")
