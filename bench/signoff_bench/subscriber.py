"""A subscriber's layers: the CPU FastStream's per-message machinery costs this process (issue 18).

``PYTHONPATH=bench .venv/bin/python -m signoff_bench.subscriber`` fills a local queue with
``BENCH_N`` messages (default 2000; a 1 kB body, as a contract is) and consumes them, manual
acks, prefetch 32, through each of:

- ``before``: the services' subscriber before issue 18 — FastStream's telemetry middleware on an
  SDK tracer provider (``tracing.configure``, no exporter: as a service runs by default), the
  ``raw_body`` decoder, the delivery asked for in the handler's signature (a fast_depends field);
- ``before-no-otel``: the same without the telemetry middleware;
- ``traced``: as a service subscribes now when it exports spans — ``message_spans.Traced`` (here
  nothing is exported: the figure is the spans' making, not their export), the delivery from
  FastStream's context (``consumer.delivered``), fast_depends off (``apply_types=False``);
- ``propagated``: as a service subscribes now by default (no exporter): ``Propagated``;
- ``propagated+fd``: the same with fast_depends left on (what ``apply_types=False`` saves);
- ``no-tracing``: no tracing middleware at all (FastStream's floor here);
- ``aio-pika``: no FastStream at all, aio-pika's own consumer (the floor);

alternating, ``BENCH_REPEATS`` rounds (default 3), after one warm-up round each;
``BENCH_VARIANTS`` (comma-separated) picks some. The handler only acknowledges: what is measured
is the layers. Printed: the median and least process CPU per message from the first delivery
handled to the last (``time.process_time``; the filling not included), and the load average.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Annotated, Any

import aio_pika
import structlog
from faststream import AckPolicy
from faststream._internal.context import Context
from faststream.rabbit import Channel, RabbitBroker
from faststream.rabbit.message import RabbitMessage
from faststream.rabbit.opentelemetry import RabbitTelemetryMiddleware
from opentelemetry import trace
from signoff_runtime import tracing
from signoff_runtime.consumer import raw_body, subscribe
from signoff_runtime.message_spans import Propagated, Traced
from signoff_runtime.testing import servers
from signoff_runtime.topology import Topology

PREFETCH = 32
TRACED: dict[str, Any] = {"traceparent": tracing.start()}
BODY = b"x" * 1024
QUEUE_KEY = "executor.contracts"
#: variant: (tracing middleware, how the handler gets the delivery, fast_depends on the broker)
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "before": ("otel", "annotated", True),
    "before-no-otel": ("none", "annotated", True),
    "traced": ("traced", "delivered", False),
    "propagated": ("propagated", "delivered", False),
    "propagated+fd": ("propagated", "delivered", True),
    "no-tracing": ("none", "delivered", False),
}


class _Clock:
    """Process CPU from the first message handled to the ``n``-th."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.started = n, 0, 0.0
        self.done: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def tick(self) -> None:
        self.seen += 1
        if self.seen == 1:
            self.started = time.process_time()
        elif self.seen == self.n and not self.done.done():
            self.done.set_result((time.process_time() - self.started) * 1000 / (self.n - 1))


async def _fill(amqp_url: str, queue: str, n: int) -> None:
    """``n`` messages into ``queue`` (declared by ``_declare``), before the clock starts; each
    carries a ``traceparent`` and a correlation id, as every message between the services does
    (FastStream's telemetry middleware makes a second span for a message without a parent)."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for _ in range(n):
            await channel.default_exchange.publish(
                aio_pika.Message(
                    BODY,
                    message_id=secrets.token_hex(8),
                    correlation_id=secrets.token_hex(8),
                    headers=TRACED,
                ),
                routing_key=queue,
            )


class _AsyncContext(Context):
    """The delivery as a fast_depends field resolved on the loop (``consumer.Delivery`` before
    issue 18): what ``before`` pays per message."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


def _middlewares(tracing_layer: str) -> tuple[Any, ...]:
    provider = trace.get_tracer_provider()
    return {
        "otel": (RabbitTelemetryMiddleware(tracer_provider=provider),),
        "traced": (Traced(provider),),
        "propagated": (Propagated(),),
        "none": (),
    }[tracing_layer]


async def _faststream(amqp_url: str, topology: Topology, n: int, variant: str) -> float:
    tracing_layer, delivery, fast_depends = VARIANTS[variant]
    broker = RabbitBroker(
        amqp_url,
        middlewares=_middlewares(tracing_layer),
        log_level=logging.DEBUG,
        apply_types=fast_depends,
    )
    clock = _Clock(n)

    async def handler(msg: RabbitMessage) -> None:
        await msg.ack()
        clock.tick()

    if delivery == "delivered":
        subscribe(broker, topology, QUEUE_KEY, handler, prefetch=PREFETCH)
    else:

        async def annotated(msg: Annotated[RabbitMessage, _AsyncContext("message")]) -> None:
            await handler(msg)

        broker.subscriber(
            topology.queue(QUEUE_KEY),
            ack_policy=AckPolicy.MANUAL,
            channel=Channel(prefetch_count=PREFETCH),
            no_reply=True,
            decoder=raw_body,
        )(annotated)
    await _fill(amqp_url, topology.name(QUEUE_KEY), n)
    async with broker:
        await broker.start()
        return await asyncio.wait_for(clock.done, 300)


async def _aio_pika(amqp_url: str, topology: Topology, n: int) -> float:
    queue_name = topology.name(QUEUE_KEY)
    await _fill(amqp_url, queue_name, n)
    clock = _Clock(n)
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.get_queue(queue_name)

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await message.ack()
            clock.tick()

        await queue.consume(on_message)
        return await asyncio.wait_for(clock.done, 300)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    tracing.configure("bench")
    n = int(os.environ.get("BENCH_N", "2000"))
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    with ExitStack() as exits:
        amqp_url = servers.amqp_url(exits)
        prefix = f"bench{secrets.token_hex(3)}"
        topology = Topology(prefix)
        # the queue as the topology declares it (FastStream's subscriber declares it alike)
        await _declare(amqp_url, topology)
        every: dict[str, Callable[[], Awaitable[float]]] = {
            v: functools.partial(_faststream, amqp_url, topology, n, v) for v in VARIANTS
        }
        every["aio-pika"] = functools.partial(_aio_pika, amqp_url, topology, n)
        chosen = os.environ.get("BENCH_VARIANTS", ",".join(every)).split(",")
        paths = {v: every[v] for v in chosen}
        results: dict[str, list[float]] = {p: [] for p in paths}
        try:
            for run in paths.values():
                await run()  # warm-up
            for _ in range(repeats):
                for path, run in paths.items():
                    results[path].append(await run())
        finally:
            await _delete(amqp_url, topology)
        _report(n, results)


def _report(n: int, results: dict[str, list[float]]) -> None:
    base = statistics.median(next(iter(results.values())))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    _say(
        f"# N={n} messages a round, {len(next(iter(results.values())))} rounds; CPU of this process"
    )
    _say(f"# load average at the end: {load}")
    _say(f"{'variant':15} {'median':>7} {'min':>7}  vs first  rounds (ms/message)")
    for path, figures in results.items():
        cpu = statistics.median(figures)
        rounds = " ".join(f"{c:.3f}" for c in figures)
        _say(f"{path:15} {cpu:7.3f} {min(figures):7.3f}  {cpu / base:6.0%}    {rounds}")


async def _declare(amqp_url: str, topology: Topology) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(
            topology.name(QUEUE_KEY), durable=True, arguments=topology.queue_arguments(QUEUE_KEY)
        )


async def _delete(amqp_url: str, topology: Topology) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(topology.name(QUEUE_KEY))


if __name__ == "__main__":
    asyncio.run(main())
