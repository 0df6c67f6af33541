"""The outbox relay: publishes a schema's outbox rows, never losing one.

The relay publishes unsent rows (written by ``signoff_runtime.outbox``) as persistent messages,
waits for the broker's confirm, and only then marks them sent. A relay killed between confirm and
mark-sent publishes the row again — consumers dedup by ``message_id`` — but a message is never
lost. Publishing to a routing key with no binding raises (``on_return_raises``) and the row stays
in the outbox with its error. Every message carries the relay's broker user in ``user_id``
(RabbitMQ checks it; consumers require it).

The relay wakes on ``NOTIFY`` (sent by the writing statement, so it fires at commit) and polls
slowly as a safety net. Several relays may run: rows are taken with ``FOR UPDATE SKIP LOCKED``.

Each round that took rows is a span of its own (``outbox.relay <schema>``, no parent): it starts
when the ``NOTIFY`` that woke it arrived, and marks when the round began, selected its rows,
published them and had every confirm; it ends once they are marked sent, and names the message
ids it carried (``signoff.outbox.message_ids``) — the timeline of one approval reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import aio_pika
import asyncpg
import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from sqlalchemy import Table, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_runtime import failover
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.metrics import (
    OUTBOX_OLDEST_UNSENT,
    OUTBOX_PUBLISH_ERRORS,
    OUTBOX_PUBLISHED,
    OUTBOX_RELAY_HEARTBEAT,
    OUTBOX_UNSENT,
)
from signoff_runtime.outbox import notify_channel
from signoff_runtime.settings import broker_user
from signoff_runtime.topology import Topology

log = structlog.get_logger(__name__)
_TRACER = trace.get_tracer(__name__)


def persistent_message(
    body: bytes,
    *,
    message_id: str,
    correlation_id: str | None,
    message_type: str,
    user_id: str,
    headers: dict[str, Any],
) -> aio_pika.Message:
    """A message as signoff publishes one: JSON, persistent, its envelope's ids and type repeated
    in the AMQP properties, and the sender's broker user (RabbitMQ checks it)."""
    return aio_pika.Message(
        body,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=message_id,
        correlation_id=correlation_id,
        type=message_type,
        user_id=user_id,
        headers=headers,
    )


class OutboxRelay:
    """Publishes one schema's outbox. ``run`` until cancelled."""

    def __init__(
        self,
        engine: AsyncEngine,
        table: Table,
        amqp_url: str,
        topology: Topology,
        *,
        batch: int = 200,
        poll_s: float = 1.0,
        publish_timeout_s: float = 10.0,
        mark_before_confirm: bool = False,
    ) -> None:
        self._engine = engine
        self._table = table
        self._amqp_url = amqp_url
        self._user = broker_user(amqp_url)
        self._topology = topology
        self._batch = batch
        self._poll_s = poll_s
        self._timeout = publish_timeout_s
        self._wake = asyncio.Event()
        #: when the first NOTIFY since the last round began arrived (ns since the epoch)
        self._notified_ns: int | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        #: SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM, a negative control (``SIGNOFF_ENV=test`` only)
        self._mark_before_confirm = mark_before_confirm

    async def run(self) -> None:
        connection = await failover.connect_robust(self._amqp_url)
        listener = await self._listen()
        measure_at = 0.0
        try:
            while True:
                try:
                    await self._ensure_channel(connection)
                    while await self.drain() == self._batch:
                        pass
                    # a busy relay wakes on every commit; the lag gauges need no such rate
                    if time.monotonic() >= measure_at:
                        await self.measure()
                        measure_at = time.monotonic() + self._poll_s
                except (OSError, asyncpg.PostgresError, aio_pika.exceptions.AMQPError) as exc:
                    log.warning("outbox.drain_failed", schema=self._table.schema, error=str(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll_s)
                self._wake.clear()
        finally:
            with contextlib.suppress(Exception):
                await listener.close()
            await connection.close()

    async def _ensure_channel(self, connection: aio_pika.abc.AbstractRobustConnection) -> None:
        """A channel the broker closed (e.g. a row naming a missing exchange) is reopened, so one
        bad row backs off on its own instead of stopping every publish after it."""
        if self._channel is None or self._channel.is_closed:
            self._channel = await connection.channel(publisher_confirms=True, on_return_raises=True)

    async def _listen(self) -> asyncpg.Connection:
        conn = await asyncpg.connect(asyncpg_dsn(str(self._engine.url.render_as_string(False))))
        await conn.add_listener(notify_channel(self._table), self._notified)
        return conn

    def _notified(self, *_: Any) -> None:
        if self._notified_ns is None:
            self._notified_ns = time.time_ns()
        self._wake.set()

    async def measure(self) -> None:
        """Refresh the lag gauges (one query on the unsent rows' partial index)."""
        schema = self._table.schema
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*) AS n, coalesce(extract(epoch FROM "  # noqa: S608
                        f"now() - min(created_at)), 0) AS age FROM {schema}.outbox "
                        "WHERE sent_at IS NULL"
                    )
                )
            ).one()
        OUTBOX_UNSENT.labels(schema=schema).set(row.n)
        OUTBOX_OLDEST_UNSENT.labels(schema=schema).set(float(row.age))
        # the relay is alive and reaches its table: an alert watches this stop moving
        OUTBOX_RELAY_HEARTBEAT.labels(schema=schema).set_to_current_time()

    async def drain(self) -> int:
        """Publish one batch of due rows; return how many rows were taken."""
        if self._mark_before_confirm:
            return await self._drain_marking_first()
        assert self._channel is not None, "run() opens the channel"
        schema = self._table.schema
        began = time.time_ns()
        notified, self._notified_ns = self._notified_ns, None
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT id, message_id, exchange, routing_key, message_type, "  # noqa: S608
                        f"correlation_id, body, headers FROM {schema}.outbox "
                        "WHERE sent_at IS NULL AND available_at <= now() "
                        "ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED"
                    ),
                    {"n": self._batch},
                )
            ).all()
            if not rows:
                return 0
            span = self._span(rows, notified or began, began)
            span.add_event("publishing")
            results = await asyncio.gather(
                *(self._publish(row) for row in rows), return_exceptions=True
            )
            span.add_event("confirmed")
            sent = [row.id for row, res in zip(rows, results, strict=True) if res is None]
            failed = [
                (row.id, repr(res)[:500])
                for row, res in zip(rows, results, strict=True)
                if res is not None
            ]
            await self._mark(conn, sent, failed)
        span.end()
        return len(rows)

    def _span(self, rows: Any, start: int, began: int) -> trace.Span:
        """The round's span (a root: it serves many traces), from the NOTIFY that woke it."""
        span = _TRACER.start_span(
            f"outbox.relay {self._table.schema}",
            context=otel_context.Context(),
            start_time=start,
            attributes={
                "signoff.outbox.schema": str(self._table.schema),
                "signoff.outbox.message_ids": [row.message_id for row in rows],
            },
        )
        span.add_event("began", timestamp=began)
        span.add_event("selected")
        return span

    async def _drain_marking_first(self) -> int:
        """The negative control ``SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM``: commit a batch as
        sent, then publish it. A crash (or a refused publish) before the confirm loses the message —
        exactly what ``drain`` exists to prevent."""
        schema = self._table.schema
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"UPDATE {schema}.outbox SET sent_at = now(), attempts = attempts + 1 "  # noqa: S608
                        f"WHERE id IN (SELECT id FROM {schema}.outbox WHERE sent_at IS NULL "
                        "AND available_at <= now() ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED) "
                        "RETURNING id, message_id, exchange, routing_key, message_type, "
                        "correlation_id, body, headers"
                    ),
                    {"n": self._batch},
                )
            ).all()
        results = await asyncio.gather(
            *(self._publish(row) for row in rows), return_exceptions=True
        )
        for row, result in zip(rows, results, strict=True):
            if result is not None:
                log.warning(
                    "outbox.unsafe_message_lost", schema=schema, row=row.id, error=repr(result)
                )
        return len(rows)

    async def _publish(self, row: Any) -> None:
        assert self._channel is not None
        exchange = await self._channel.get_exchange(row.exchange, ensure=False)
        message = persistent_message(
            bytes(row.body),
            message_id=row.message_id,
            correlation_id=row.correlation_id,
            message_type=row.message_type,
            user_id=self._user,
            headers=dict(row.headers or {}),
        )
        await exchange.publish(
            message, routing_key=row.routing_key, mandatory=True, timeout=self._timeout
        )

    async def _mark(
        self, conn: AsyncConnection, sent: list[int], failed: list[tuple[int, str]]
    ) -> None:
        schema = self._table.schema
        if sent:
            await conn.execute(
                text(
                    f"UPDATE {schema}.outbox SET sent_at = now(), attempts = attempts + 1 "  # noqa: S608
                    "WHERE id = ANY(:ids)"
                ),
                {"ids": sent},
            )
            OUTBOX_PUBLISHED.labels(schema=schema).inc(len(sent))
        for row_id, error in failed:
            # Back off per row so one unroutable message does not spin the relay.
            await conn.execute(
                text(
                    f"UPDATE {schema}.outbox SET attempts = attempts + 1, last_error = :err, "  # noqa: S608
                    "available_at = now() + make_interval(secs => least(60, 2 ^ attempts)) "
                    "WHERE id = :id"
                ),
                {"id": row_id, "err": error},
            )
            OUTBOX_PUBLISH_ERRORS.labels(schema=schema).inc()
            log.warning("outbox.publish_failed", schema=schema, row=row_id, error=error)
