"""The negative control ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``, which needs more than a branch.

A service with the switch on does not write a state change's messages to its outbox in the
change's transaction: it holds them and, once the transaction has committed, publishes them
straight to the broker — best effort, without publisher confirms, nothing written down. A crash
between the commit and the publish, or a publish the broker drops, loses the message with nothing
left to send it again: the failure the transactional outbox exists to prevent, made possible so
that the fault suite can show its checker sees it. Settings refuse the switch outside
``SIGNOFF_ENV=test``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

import aio_pika
import structlog
from signoff_contracts.v1 import Envelope

from signoff_runtime import failover, tracing
from signoff_runtime.relay import persistent_message
from signoff_runtime.service import Runtime
from signoff_runtime.settings import broker_user

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Held:
    message: Envelope
    exchange: str
    routing_key: str
    headers: dict[str, str]


_held: ContextVar[list[Held] | None] = ContextVar("signoff_unsafe_held", default=None)


class DirectPublisher:
    """Publishes messages directly after a commit instead of through the outbox.

    Either call ``publish`` once the transaction has committed, or run the transaction inside
    ``after_commit()`` and ``hold`` its messages there. ``run`` is a service loop: it closes the
    connection when the service stops.
    """

    def __init__(self, amqp_url: str) -> None:
        self._amqp_url = amqp_url
        self._user = broker_user(amqp_url)
        self._connection: aio_pika.abc.AbstractRobustConnection | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._lock = asyncio.Lock()

    def hold(
        self,
        message: Envelope,
        *,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Keep ``message`` until the enclosing ``after_commit()`` block has succeeded."""
        held = _held.get()
        if held is None:
            raise RuntimeError("hold() outside an after_commit() block")
        held.append(Held(message, exchange, routing_key, {**tracing.headers(), **(headers or {})}))

    @contextlib.asynccontextmanager
    async def after_commit(self) -> AsyncIterator[None]:
        """Publish what the block held once it returns (its transaction committed); an error
        raised by the block drops them, as a rolled-back transaction drops its outbox rows."""
        held: list[Held] = []
        token = _held.set(held)
        try:
            yield
        finally:
            _held.reset(token)
        for item in held:
            await self.publish(
                item.message,
                exchange=item.exchange,
                routing_key=item.routing_key,
                headers=item.headers,
            )

    async def publish(
        self,
        message: Envelope,
        *,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Publish once, now; a failure is logged and the message is gone."""
        try:
            channel = await self._open()
            target = await channel.get_exchange(exchange, ensure=False)
            await target.publish(
                persistent_message(
                    message.model_dump_json().encode(),
                    message_id=message.message_id,
                    correlation_id=message.correlation_id,
                    message_type=message.type,
                    user_id=self._user,
                    headers={**tracing.headers(), **(headers or {})},
                ),
                routing_key=routing_key,
            )
        except Exception as exc:
            log.warning(
                "unsafe.direct_publish_lost",
                message_id=message.message_id,
                type=message.type,
                error=repr(exc),
            )

    async def run(self) -> None:
        """Wait until cancelled (the service stopping), then close the connection."""
        try:
            await asyncio.Event().wait()
        finally:
            if self._connection is not None:
                await self._connection.close()

    async def _open(self) -> aio_pika.abc.AbstractChannel:
        async with self._lock:
            if self._connection is None:
                self._connection = await failover.connect_robust(self._amqp_url)
            if self._channel is None or self._channel.is_closed:
                self._channel = await self._connection.channel(publisher_confirms=False)
            return self._channel


def direct_publisher(runtime: Runtime) -> DirectPublisher | None:
    """A publisher living as long as the service, if ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``."""
    if not runtime.settings.unsafe.publish_without_outbox:
        return None
    publisher = DirectPublisher(runtime.settings.amqp.url)
    runtime.loops.append(publisher.run)
    return publisher
