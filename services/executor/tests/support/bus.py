"""The test's view of RabbitMQ: publish contracts, read dead letters and published outcomes."""

from __future__ import annotations

from typing import Any, cast

import aio_pika
from signoff_contracts.v1 import Envelope
from signoff_runtime.topology import ROUTING_KEYS, Topology


class Bus:
    def __init__(
        self, connection: aio_pika.abc.AbstractRobustConnection, topology: Topology
    ) -> None:
        self._connection = connection
        self.topology = topology
        #: every message must name its sender (``signoff_runtime.senders``): the connection's user
        self.user_id = cast(aio_pika.RobustConnection, connection).url.user or "guest"

    async def publish(
        self,
        message: Envelope | bytes,
        *,
        exchange: str = "contracts",
        routing_key: str | None = None,
        message_id: str | None = None,
    ) -> None:
        channel = await self._connection.channel(publisher_confirms=True)
        async with channel:
            ex = await channel.get_exchange(self.topology.name(exchange), ensure=False)
            body = message if isinstance(message, bytes) else message.model_dump_json().encode()
            mid = message_id or (None if isinstance(message, bytes) else message.message_id)
            await ex.publish(
                aio_pika.Message(
                    body,
                    message_id=mid,
                    content_type="application/json",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    user_id=self.user_id,
                ),
                routing_key=routing_key or ROUTING_KEYS["executor.contracts"],
                mandatory=True,
            )

    async def drain(self, queue: str) -> list[aio_pika.abc.AbstractIncomingMessage]:
        """Take every message now in ``queue`` (a full name), acking each."""
        channel = await self._connection.channel()
        taken = []
        async with channel:
            q = await channel.get_queue(queue, ensure=False)
            while (msg := await q.get(no_ack=True, fail=False)) is not None:
                taken.append(msg)
        return taken

    async def dead_letters(self, key: str = "executor.contracts") -> list[Any]:
        return await self.drain(self.topology.dlq(key))

    async def depth(self, key: str) -> tuple[int, int]:
        """(ready messages, consumers) of a work queue, by passive declare."""
        channel = await self._connection.channel()
        async with channel:
            q = await channel.declare_queue(self.topology.name(key), passive=True)
            result = q.declaration_result
            return result.message_count or 0, result.consumer_count or 0
