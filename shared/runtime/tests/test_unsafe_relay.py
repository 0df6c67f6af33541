"""``SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM`` really loses a message the safe relay keeps.

A relay that dies between taking a row and the broker's confirm is the fault: the safe relay
leaves the row unsent (it is published again later); the switched relay has already committed
it as sent, so the message is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
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
SCHEMA = "negative_control_relay"


class DiesBeforeConfirm(OutboxRelay):
    """A relay killed after it took its rows, before any publish was confirmed."""

    attempted: asyncio.Event

    async def _publish(self, row: Any) -> None:
        self.attempted.set()
        raise RuntimeError("killed before the broker's confirm")


@pytest_asyncio.fixture(loop_scope="session")
async def table(engine: AsyncEngine) -> Table:
    return await fresh_outbox(engine, SCHEMA)


async def _enqueue(engine: AsyncEngine, table: Table, topology: Topology) -> Envelope:
    message = Envelope(type="test.negative_control")
    async with engine.begin() as conn:
        out = Outgoing(message, topology.name("contracts"), ROUTING_KEYS["executor.contracts"])
        await enqueue(conn, table, [out])
    return message


async def _sent_at(engine: AsyncEngine, message: Envelope) -> Any:
    async with engine.connect() as conn:
        return await conn.scalar(
            text(f"SELECT sent_at FROM {SCHEMA}.outbox WHERE message_id = :m"),
            {"m": message.message_id},
        )


@contextlib.asynccontextmanager
async def _running(relay: OutboxRelay) -> AsyncIterator[None]:
    task = asyncio.create_task(relay.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _dying(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology, unsafe: bool
) -> DiesBeforeConfirm:
    relay = DiesBeforeConfirm(
        engine, table, amqp_url, topology, poll_s=0.1, mark_before_confirm=unsafe
    )
    relay.attempted = asyncio.Event()
    return relay


async def test_the_safe_relay_keeps_a_message_whose_publish_never_confirmed(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    message = await _enqueue(engine, table, topology)
    relay = _dying(engine, table, amqp_url, topology, unsafe=False)
    async with _running(relay):
        await asyncio.wait_for(relay.attempted.wait(), 15)
    assert await _sent_at(engine, message) is None  # published again by the next relay


async def test_marking_sent_before_the_confirm_loses_the_message(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    message = await _enqueue(engine, table, topology)
    relay = _dying(engine, table, amqp_url, topology, unsafe=True)
    async with _running(relay):
        await asyncio.wait_for(relay.attempted.wait(), 15)
    assert await _sent_at(engine, message) is not None
    assert await queued_ids(amqp_url, topology) == []  # never published, never will be


async def test_the_switched_relay_still_publishes_when_nothing_fails(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    message = await _enqueue(engine, table, topology)
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=0.1, mark_before_confirm=True)
    async with _running(relay):
        queued = await wait_until(lambda: queued_ids(amqp_url, topology), what="the publish")
    assert queued == [message.message_id]
