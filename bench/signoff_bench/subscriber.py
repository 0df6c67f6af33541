"""A subscriber's layers: the CPU FastStream's per-message machinery costs this process (issue 18).

``PYTHONPATH=bench .venv/bin/python -m signoff_bench.subscriber`` fills a local queue with
``BENCH_N`` messages (default 2000; a 1 kB body, as a contract is) and consumes them, manual
acks, prefetch 32, through each of:

- ``faststream``: the services' subscriber — ``RabbitBroker`` with the telemetry middleware on
  an SDK tracer provider (``tracing.configure``, no exporter: as a service runs by default), the
  ``raw_body`` decoder, the ``Delivery`` annotation (``consumer.subscribe``);
- ``no-telemetry``: the same without the telemetry middleware;
- ``aio-pika``: no FastStream at all, aio-pika's own consumer (the floor);

alternating, ``BENCH_REPEATS`` rounds (default 3), after one warm-up round each. The handler
only acknowledges: what is measured is the layers. Printed: the median process CPU per message
from the first delivery handled to the last (``time.process_time``; the filling not included).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack

import aio_pika
import structlog
from faststream.rabbit import RabbitBroker
from signoff_runtime import tracing
from signoff_runtime.consumer import Delivery, subscribe
from signoff_runtime.testing import servers
from signoff_runtime.topology import Topology

PREFETCH = 32
BODY = b"x" * 1024
QUEUE_KEY = "executor.contracts"


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
    """``n`` messages into ``queue`` (declared by ``_declare``), before the clock starts."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for _ in range(n):
            await channel.default_exchange.publish(
                aio_pika.Message(BODY, message_id=secrets.token_hex(8)), routing_key=queue
            )


async def _faststream(amqp_url: str, topology: Topology, n: int, telemetry: bool) -> float:
    broker = RabbitBroker(
        amqp_url,
        middlewares=tracing.broker_middlewares() if telemetry else (),
        log_level=logging.DEBUG,
    )
    clock = _Clock(n)

    async def handler(msg: Delivery) -> None:
        await msg.ack()
        clock.tick()

    subscribe(broker, topology, QUEUE_KEY, handler, prefetch=PREFETCH)
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
        paths: dict[str, Callable[[], Awaitable[float]]] = {
            "faststream": lambda: _faststream(amqp_url, topology, n, True),
            "no-telemetry": lambda: _faststream(amqp_url, topology, n, False),
            "aio-pika": lambda: _aio_pika(amqp_url, topology, n),
        }
        results: dict[str, list[float]] = {p: [] for p in paths}
        try:
            for run in paths.values():
                await run()  # warm-up
            for _ in range(repeats):
                for path, run in paths.items():
                    results[path].append(await run())
        finally:
            await _delete(amqp_url, topology)
        base = statistics.median(results["faststream"])
        _say(f"# N={n} messages per round, {repeats} rounds, CPU = this process")
        for path, figures in results.items():
            cpu = statistics.median(figures)
            rounds = " ".join(f"{c:.3f}" for c in figures)
            _say(f"{path:13} CPU {cpu:6.3f} ms/message ({cpu / base:5.0%})  rounds: {rounds}")


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
