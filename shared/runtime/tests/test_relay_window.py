"""A relay's backlog goes out through a window: at most ``publishing`` publishes under way at
once (the message built, sent, its confirm awaited), however many rows its rounds hold, and
every row still goes out once."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import pytest_asyncio
from signoff_contracts.v1 import Envelope
from signoff_runtime.outbox import Outgoing, enqueue
from signoff_runtime.relay import OutboxRelay
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.outboxes import fresh_outbox, queued_ids
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
SCHEMA = "relay_window"
ROWS = 300
WINDOW = 8


@pytest_asyncio.fixture(loop_scope="session")
async def table(engine: AsyncEngine) -> Table:
    return await fresh_outbox(engine, SCHEMA)


class Counting(OutboxRelay):
    """Counts the publishes under way on the channel, from aiormq's publish to its confirm."""

    under_way = 0
    most = 0

    async def _ensure_channel(self) -> None:
        await super()._ensure_channel()
        assert self._channel is not None
        underlay: Any = await self._channel.get_underlay_channel()
        if getattr(underlay, "counted", False):
            return
        publish = underlay.basic_publish

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.under_way += 1
            self.most = max(self.most, self.under_way)
            try:
                return await publish(*args, **kwargs)
            finally:
                self.under_way -= 1

        underlay.basic_publish, underlay.counted = counted, True


async def _all_sent(engine: AsyncEngine) -> bool:
    async with engine.connect() as conn:
        unsent = await conn.scalar(
            text(f"SELECT count(*) FROM {SCHEMA}.outbox WHERE sent_at IS NULL")
        )
        return unsent == 0


async def test_a_backlog_has_at_most_the_window_under_way_and_every_row_goes_out_once(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    # committed before the relay starts (no hand-over): its first rounds take all of them at
    # once, three rounds of 100 rows, whose publishes would all start together without a window
    outgoing = [
        Outgoing(
            Envelope(type="test.window"),
            topology.name("contracts"),
            ROUTING_KEYS["executor.contracts"],
        )
        for _ in range(ROWS)
    ]
    async with engine.begin() as conn:
        await enqueue(conn, table, outgoing)
    relay = Counting(engine, table, amqp_url, topology, poll_s=60, batch=100, publishing=WINDOW)
    task = asyncio.create_task(relay.run())
    try:
        await wait_until(lambda: _all_sent(engine), what="every row marked sent")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert 1 < relay.most <= WINDOW, relay.most  # confirms overlap, never more than the window
    queued = await queued_ids(amqp_url, topology)
    assert sorted(queued) == sorted(out.message.message_id for out in outgoing)
