"""The relay of a writer's own process is handed the rows that writer committed; others hear
the ``NOTIFY``.

A writer inside a unit of work, in a process whose relay publishes the same outbox, sends no
``NOTIFY``: it hands its rows to that relay after the commit, which publishes each once and
marks it sent. A writer outside a unit of work (or with no relay of its own) still sends the
``NOTIFY``. Most relays here poll once a minute, so nothing but the hand-over or the ``NOTIFY``
can publish a row within the test's deadline; the two tests that need the poll itself (a row
come due with no word, a listener lost) poll every 0.3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from signoff_contracts.v1 import Envelope
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.outbox import Outgoing, enqueue, notify_channel
from signoff_runtime.relay import OutboxRelay
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.outboxes import fresh_outbox, queued_ids
from signoff_runtime.topology import ROUTING_KEYS, Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
SCHEMA = "relay_hand_over"
SENTINEL = "sentinel"


@pytest_asyncio.fixture(loop_scope="session")
async def table(engine: AsyncEngine) -> Table:
    return await fresh_outbox(engine, SCHEMA)


def _outgoing(topology: Topology) -> Outgoing:
    message = Envelope(type="test.hand_over")
    return Outgoing(message, topology.name("contracts"), ROUTING_KEYS["executor.contracts"])


async def _sent_at(engine: AsyncEngine, message_id: str) -> Any:
    async with engine.connect() as conn:
        return await conn.scalar(
            text(f"SELECT sent_at FROM {SCHEMA}.outbox WHERE message_id = :m"), {"m": message_id}
        )


@contextlib.asynccontextmanager
async def _listening(engine: AsyncEngine, table: Table) -> AsyncIterator[list[str]]:
    """Every ``NOTIFY`` payload on the table's channel, in order."""
    heard: list[str] = []
    conn = await asyncpg.connect(asyncpg_dsn(engine.url.render_as_string(False)))
    await conn.add_listener(notify_channel(table), lambda *args: heard.append(str(args[-1])))
    try:
        yield heard
    finally:
        await conn.close()


async def _connected(relay: OutboxRelay) -> bool:
    return relay._rows is not None  # registered with this process's writers, and connected


@contextlib.asynccontextmanager
async def _running(relay: OutboxRelay) -> AsyncIterator[OutboxRelay]:
    task = asyncio.create_task(relay.run())
    try:
        await wait_until(lambda: _connected(relay), what="the relay to connect")
        yield relay
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _notify_sentinel(engine: AsyncEngine, table: Table) -> None:
    """A ``NOTIFY`` of our own, after everything before it: heard last, if the rest was heard."""
    async with engine.begin() as conn:
        await conn.execute(
            text("SELECT pg_notify(:c, :p)"), {"c": notify_channel(table), "p": SENTINEL}
        )


async def test_a_writer_in_a_unit_of_work_hands_its_rows_to_its_own_relay(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=60)
    async with _listening(engine, table) as heard, _running(relay):
        out = _outgoing(topology)
        async with unit_of_work(engine) as uow:
            await enqueue(uow.conn, table, [out])
        message_id = out.message.message_id
        await wait_until(lambda: _sent_at(engine, message_id), what="the row to be marked sent")
        await _notify_sentinel(engine, table)
        await wait_until(lambda: _heard(heard), what="our own NOTIFY")
    assert heard == [SENTINEL]  # the writer sent none
    assert await queued_ids(amqp_url, topology) == [message_id]  # published once


async def test_a_writer_outside_a_unit_of_work_wakes_the_relay_by_notify(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    """Right after a round of hand-overs too: the ``NOTIFY``'s wake takes from the table."""
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=60)
    async with _listening(engine, table) as heard, _running(relay):
        handed = _outgoing(topology)
        async with unit_of_work(engine) as uow:
            await enqueue(uow.conn, table, [handed])
        await wait_until(partial(_sent_at, engine, handed.message.message_id), what="handed")
        assert relay._rows is not None
        ran: list[str] = []
        relay._rows.conn.add_query_logger(lambda record: ran.append(record.query))
        out = _outgoing(topology)
        async with engine.begin() as conn:
            await enqueue(conn, table, [out])
        message_id = out.message.message_id
        await wait_until(lambda: _sent_at(engine, message_id), what="the row to be marked sent")
        await _notify_sentinel(engine, table)
        await wait_until(lambda: _heard(heard), what="our own NOTIFY")
    assert heard == ["", SENTINEL]
    assert len(_takes(ran)) >= 1, ran
    assert await queued_ids(amqp_url, topology) == [handed.message.message_id, message_id]


def _takes(queries: list[str]) -> list[str]:
    """The relay's takes among the statements its own connection ran (``relay_rows.take``)."""
    return [q for q in queries if "FOR UPDATE SKIP LOCKED" in q]


async def _heard(heard: list[str]) -> bool:
    return SENTINEL in heard


async def test_a_row_handed_over_after_a_take_published_it_is_not_published_again(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    """The writer's hand-over runs when its task resumes after the commit; under load a round
    of the relay may take the committed row first, publish it and mark it sent. The late
    hand-over must not publish it a second time."""
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=60)
    async with _running(relay):
        out = _outgoing(topology)
        async with engine.begin() as conn:  # outside a unit of work: the NOTIFY wakes a take
            await enqueue(conn, table, [out])
        message_id = out.message.message_id
        await wait_until(lambda: _sent_at(engine, message_id), what="the row to be marked sent")
        query = text(f"SELECT * FROM {SCHEMA}.outbox WHERE message_id = :m")
        async with engine.connect() as conn:
            row = (await conn.execute(query, {"m": message_id})).mappings().one()
        relay.offer([dict(row)])  # the writer's hand-over, late (it wakes the relay)
        later = _outgoing(topology)
        async with unit_of_work(engine) as uow:
            await enqueue(uow.conn, table, [later])
        await wait_until(
            lambda: _sent_at(engine, later.message.message_id), what="a later row to be sent"
        )
    assert await queued_ids(amqp_url, topology) == [message_id, later.message.message_id]


async def test_a_hand_over_has_written_its_publishes_before_the_writer_carries_on(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    """What the next hop waits for leaves first: once the writer's unit of work has ended (its
    hand-over awaited), the relay has published the row and aiormq's writer has taken the frames
    off its queue and written them, before the writer's own next step (its HTTP answer, its ack)
    can run. Three turns of the loop: the relay starts the round, the round's publish puts its
    frames on the write queue, the connection's writer writes them."""
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=60)
    async with _running(relay):
        first = _outgoing(topology)  # the first publish to an exchange checks it: a round trip
        async with unit_of_work(engine) as uow:
            await enqueue(uow.conn, table, [first])
        await wait_until(lambda: _sent_at(engine, first.message.message_id), what="a first row")
        assert relay._channel is not None
        underlay: Any = await relay._channel.get_underlay_channel()
        published = underlay.delivery_tag
        out = _outgoing(topology)
        async with unit_of_work(engine) as uow:
            await enqueue(uow.conn, table, [out])
        # nothing awaited since the unit of work ended
        assert (underlay.delivery_tag, underlay.write_queue.qsize()) == (published + 1, 0)
        await wait_until(lambda: _sent_at(engine, out.message.message_id), what="the row sent")


async def test_the_poll_finds_a_row_that_came_due_while_hand_overs_kept_the_relay_awake(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    """A row that comes due with no word — a back-off over, a lease run out, a writer that died
    between its commit and its hand-over — waits for the poll. A relay woken by hand-overs all
    the time never times out waiting: the row must still be published while the hand-overs go
    on (each wake's take finds it; a relay that skipped the take after hand-overs would need a
    clock of its own for the poll: docs/benchmarks.md, "Session 25")."""
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=0.3)
    async with _running(relay):
        late = _outgoing(topology)
        async with engine.begin() as conn:  # its NOTIFY's take finds it not due yet
            await enqueue(conn, table, [late])
            await conn.execute(
                text(
                    f"UPDATE {SCHEMA}.outbox SET available_at = now() + interval '1 second' "
                    "WHERE message_id = :m"
                ),
                {"m": late.message.message_id},
            )
        handed: list[str] = []

        async def sent_while_handing_over() -> bool:
            out = _outgoing(topology)
            async with unit_of_work(engine) as uow:
                await enqueue(uow.conn, table, [out])
            handed.append(out.message.message_id)
            return bool(await _sent_at(engine, late.message.message_id))

        await wait_until(sent_while_handing_over, what="the row that came due")
        for message_id in handed:
            await wait_until(partial(_sent_at, engine, message_id), what="the handed rows sent")
    queued = await queued_ids(amqp_url, topology)
    assert sorted(queued) == sorted([late.message.message_id, *handed])
    assert len(handed) > 5  # hand-overs went on throughout: the relay never waited a full poll


async def test_a_lost_listener_is_opened_again_and_the_statements_connection_is_kept(
    engine: AsyncEngine, table: Table, amqp_url: str, topology: Topology
) -> None:
    """Each wake asks whether the relay's two connections are open and opens only the one that
    is not: a listener whose backend was ended comes back on the next wake (the poll's here),
    and the connection that runs the relay's statements, still open, is not replaced."""
    relay = OutboxRelay(engine, table, amqp_url, topology, poll_s=0.3)
    async with _running(relay):
        lost, kept = relay._listener, relay._rows
        assert lost is not None and kept is not None
        async with engine.begin() as conn:
            await conn.execute(
                text("SELECT pg_terminate_backend(:pid)"), {"pid": lost.get_server_pid()}
            )

        async def listening_again() -> bool:
            now = relay._listener
            return now is not None and now is not lost and not now.is_closed()

        await wait_until(listening_again, what="a new listener")
        assert relay._rows is kept and not kept.closed
        out = _outgoing(topology)
        async with engine.begin() as conn:  # outside a unit of work: its NOTIFY, or the poll
            await enqueue(conn, table, [out])
        await wait_until(partial(_sent_at, engine, out.message.message_id), what="the row sent")
