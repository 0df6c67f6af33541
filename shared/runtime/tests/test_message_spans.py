"""``message_spans`` on a real broker: a message's handler continues the trace it carries.

A service's consumer (``consumer.consume``) gets a message whose ``traceparent`` names a span of
another process. With ``Traced`` its handler must run in a CONSUMER span that is that span's
child, and what it publishes must name the consumer span; with ``Propagated`` (no exporter) it
runs in the message's own context, and what it publishes carries the same ``traceparent`` on.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from signoff_contracts.ids import new_id
from signoff_runtime import tracing
from signoff_runtime.consumer import consume, subscribe
from signoff_runtime.message_spans import Propagated, Traced
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import QUEUES, ROUTING_KEYS, Topology

KEY = "executor.contracts"
EXCHANGE = next(spec.exchange for spec in QUEUES if spec.key == KEY)


@dataclass
class _Seen:
    """What the handler saw: the current span's context and its own ``traceparent``."""

    contexts: list[trace.SpanContext] = field(default_factory=list)
    onward: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)


@dataclass
class _Wire:
    amqp_url: str
    topology: Topology
    probe: str  # a queue the handler publishes to

    async def send(self, headers: dict[str, Any]) -> str:
        message_id = new_id("msg")
        connection = await aio_pika.connect(self.amqp_url)
        async with connection:
            exchange = await (await connection.channel()).get_exchange(
                self.topology.name(EXCHANGE), ensure=False
            )
            await exchange.publish(
                aio_pika.Message(b"{}", message_id=message_id, user_id="guest", headers=headers),
                routing_key=ROUTING_KEYS[KEY],
            )
        return message_id

    async def onward(self, count: int) -> list[dict[str, Any]]:
        """The headers of the first ``count`` messages the handler published."""
        connection = await aio_pika.connect(self.amqp_url)
        found: list[dict[str, Any]] = []
        async with connection:
            queue = await (await connection.channel()).get_queue(self.probe, ensure=False)

            async def probe() -> bool:
                while (got := await queue.get(no_ack=True, fail=False)) is not None:
                    found.append(dict(got.headers))
                return len(found) >= count

            await wait_until(probe, what=f"{count} message(s) published onwards")
        return found


@pytest_asyncio.fixture(loop_scope="session")
async def wire(amqp_url: str, topology: Topology) -> AsyncIterator[_Wire]:
    probe = f"{topology.prefix}.probe-{secrets.token_hex(3)}"
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(probe, auto_delete=False)
        yield _Wire(amqp_url, topology, probe)
        await channel.queue_delete(probe)


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


async def _running(wire: _Wire, middleware: Any, seen: _Seen) -> RabbitBroker:
    """A service's broker (no fast_depends) whose handler notes its span and publishes twice:
    once bare, once with a ``traceparent`` of its own (as a dead-letter copy keeps one)."""
    broker = RabbitBroker(wire.amqp_url, middlewares=(middleware,), apply_types=False)

    async def work(msg: RabbitMessage) -> None:
        seen.contexts.append(trace.get_current_span().get_span_context())
        await broker.publish(b"bare", routing_key=wire.probe)
        await broker.publish(b"own", routing_key=wire.probe, headers={"traceparent": OWN})

    senders = Senders.from_amqp(AmqpSettings(url=wire.amqp_url))
    consume(broker, wire.topology, senders, KEY, work, prefetch=4)
    await broker.start()
    return broker


OWN = f"00-{'a' * 32}-{'b' * 16}-01"


def _traced(exporter: InMemorySpanExporter) -> Traced:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Traced(provider)


def _processed(exporter: InMemorySpanExporter, message_id: str) -> ReadableSpan:
    [span] = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("messaging.message.id") == message_id
    ]
    return span


@pytest.mark.integration
async def test_traced_runs_the_handler_in_a_consumer_span_that_is_the_incoming_spans_child(
    wire: _Wire, exported: InMemorySpanExporter
) -> None:
    seen = _Seen()
    broker = await _running(wire, _traced(exported), seen)
    incoming = tracing.start()
    try:
        message_id = await wire.send({"traceparent": incoming})
        bare, own = await wire.onward(2)
    finally:
        await broker.stop()
    span = _processed(exported, message_id)
    assert span.name == f"{wire.topology.name(KEY)} process"
    assert span.kind is SpanKind.CONSUMER
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == incoming.split("-")[2]
    assert format(span.context.trace_id, "032x") == tracing.trace_id(incoming)
    assert span.attributes is not None
    assert span.attributes["messaging.destination.name"] == wire.topology.name(KEY)
    assert seen.contexts == [span.context]  # the handler ran inside it
    assert bare["traceparent"] == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    assert own["traceparent"] == OWN  # a caller's own is kept


@pytest.mark.integration
async def test_traced_marks_the_span_failed_when_the_handler_raises(
    wire: _Wire, exported: InMemorySpanExporter
) -> None:
    broker = RabbitBroker(wire.amqp_url, middlewares=(_traced(exported),), apply_types=False)

    async def fails(msg: RabbitMessage) -> None:
        await msg.reject(requeue=False)
        raise RuntimeError("boom")

    subscribe(broker, wire.topology, KEY, fails, prefetch=1)
    await broker.start()
    try:
        message_id = await wire.send({"traceparent": tracing.start()})

        async def finished() -> bool:
            return any(
                s.attributes and s.attributes.get("messaging.message.id") == message_id
                for s in exported.get_finished_spans()
            )

        await wait_until(finished, what="the consumer span")
    finally:
        await broker.stop()
    span = _processed(exported, message_id)
    assert span.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.message"] for e in span.events if e.attributes] == ["boom"]


@pytest.mark.integration
async def test_propagated_carries_the_incoming_traceparent_on_unchanged(wire: _Wire) -> None:
    seen = _Seen()
    broker = await _running(wire, Propagated(), seen)
    incoming = tracing.start()
    try:
        await wire.send({"traceparent": incoming})
        bare, own = await wire.onward(2)
        await wire.send({})  # no trace: one starts
        started, _ = await wire.onward(2)
    finally:
        await broker.stop()
    assert bare["traceparent"] == incoming
    assert own["traceparent"] == OWN
    assert tracing.trace_id(started["traceparent"]) not in {None, tracing.trace_id(incoming)}
    assert [format(c.span_id, "016x") for c in seen.contexts][:1] == [incoming.split("-")[2]]


def test_a_process_that_exports_nothing_only_propagates() -> None:
    assert not tracing.exporting()
    [middleware] = tracing.broker_middlewares()
    assert isinstance(middleware, Propagated)
