"""An outbox of a test's own, and what reached a queue: for the relay's tests."""

from __future__ import annotations

import aio_pika
from sqlalchemy import MetaData, Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime.outbox import outbox_table
from signoff_runtime.topology import Topology


async def fresh_outbox(engine: AsyncEngine, schema: str) -> Table:
    """``schema``'s outbox, created if missing; rows an earlier test left are marked sent, so a
    relay of this test publishes only this test's rows."""
    table = outbox_table(MetaData(), schema)
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {schema}"))
        await conn.run_sync(table.metadata.create_all)
        await conn.execute(text(f"UPDATE {schema}.outbox SET sent_at = now()"))  # noqa: S608
    return table


async def queued_ids(
    amqp_url: str, topology: Topology, queue: str = "executor.contracts"
) -> list[str]:
    """The message ids waiting in ``topology``'s ``queue``, in order; taken off it."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        found = await (await connection.channel()).get_queue(topology.name(queue), ensure=False)
        ids = []
        while (message := await found.get(no_ack=True, fail=False)) is not None:
            ids.append(str(message.message_id))
        return ids
