"""The life of a service process: connect, declare, consume, run background loops, stop cleanly.

Every service is a FastAPI application (its HTTP API, or just ``/healthz`` and ``/metrics``)
whose lifespan runs a FastStream broker and the service's background loops. Stopping gives
in-flight handlers ``graceful_timeout`` to finish before the broker closes (FastStream cancels
them otherwise; work already begun still runs to its end, and ``consumer.finish`` waits up to
``CARRY_ON_STOP_S`` for it), then cancels the loops and closes the pool. With
``SIGNOFF_METRICS__PORT`` set, ``/metrics`` is served on that port while the service runs
(``http``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

import structlog
from faststream.rabbit import RabbitBroker
from prometheus_client import start_http_server
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime import collector, consumer, failover, logs, tracing
from signoff_runtime.db import create_engine
from signoff_runtime.senders import Senders
from signoff_runtime.settings import ServiceSettings
from signoff_runtime.topology import Topology

log = structlog.get_logger(__name__)
Loop = Callable[[], Awaitable[None]]
#: how long a stopping service waits for the work of deliveries its broker's close cancelled
CARRY_ON_STOP_S = 5.0


@dataclass
class Runtime:
    """The connections one service process holds, built once and passed down."""

    name: str
    settings: ServiceSettings
    engine: AsyncEngine
    broker: RabbitBroker
    topology: Topology
    loops: list[Loop] = field(default_factory=list)

    @classmethod
    def build(
        cls, name: str, settings: ServiceSettings, graceful_timeout_s: float = 20.0
    ) -> Runtime:
        logs.configure(name, settings.log_level, settings.log_json)
        tracing.configure(name)
        if switches := settings.unsafe.enabled():
            log.warning("service.unsafe_switches_on", service=name, switches=switches)
        broker = failover.rabbit_broker(
            settings.amqp.url,
            graceful_timeout=graceful_timeout_s,
            app_id=f"signoff-{name}",
            middlewares=tracing.broker_middlewares(),
            log_level=10,  # per-message logs at DEBUG: they cost ~11 % throughput at INFO
            # handlers take the delivery (consumer.delivered): nothing for fast_depends to
            # resolve, and resolving nothing still cost every message (issue 18)
            apply_types=False,
        )
        return cls(
            name=name,
            settings=settings,
            engine=create_engine(settings.db, application_name=f"signoff-{name}"),
            broker=broker,
            topology=Topology(settings.amqp.prefix, settings.amqp.delivery_limit),
        )

    @property
    def senders(self) -> Senders:
        """Whom this service's consumers accept each message from (``SIGNOFF_AMQP__USERS``)."""
        return Senders.from_settings(self.settings)

    async def db_ok(self) -> bool:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True

    async def broker_ok(self) -> bool:
        return bool(await self.broker.ping(timeout=2.0))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.settings.amqp.declare_topology:
            await declare_topology(self.settings.amqp.url, self.topology)
        await self.broker.start()
        scrape = self._serve_metrics()
        tasks = [asyncio.create_task(_forever(self.name, loop)) for loop in self.loops]
        # what the start made lives as long as the process: out of the collector's way
        collector.settle()
        log.info("service.started", name=self.name)
        try:
            yield
        finally:
            await self.broker.stop()
            await consumer.finish(CARRY_ON_STOP_S)
            if scrape is not None:
                scrape.shutdown()
                scrape.server_close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.engine.dispose()
            tracing.flush()
            log.info("service.stopped", name=self.name)

    def _serve_metrics(self) -> WSGIServer | None:
        """``/metrics`` on a port of its own (a thread of prometheus-client's), if one is set."""
        metrics = self.settings.metrics
        if metrics.port is None:
            return None
        server, _ = start_http_server(metrics.port, metrics.host)
        log.info("service.metrics_port", name=self.name, host=metrics.host, port=metrics.port)
        return server


async def declare_topology(amqp_url: str, topology: Topology) -> None:
    connection = await failover.connect(amqp_url)
    async with connection:
        await topology.declare(await connection.channel())


async def _forever(service: str, loop: Loop) -> None:
    """Run a background loop; if it crashes, log and restart it after a pause."""
    while True:
        try:
            await loop()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error(
                "service.loop_crashed",
                service=service,
                loop=getattr(loop, "__name__", "?"),
                exc_info=exc,
            )
            await asyncio.sleep(1.0)
