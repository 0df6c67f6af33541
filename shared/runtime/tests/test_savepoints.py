"""Group commit with a savepoint per message (``signoff_runtime.savepoints``), on real RabbitMQ
and PostgreSQL.

The work records each message's id in a table with the id of the transaction that wrote it
(``pg_current_xact_id()``: the top transaction's, where a row's ``xmin`` is its savepoint's). A
``gate`` message holds its batch open until the test lets it go, so the messages sent meanwhile
are known to form the next batch together. Each message's after-commit action looks, from
another connection, for its row (committed?) and at its delivery (acknowledged yet?).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from signoff_contracts.ids import new_id
from signoff_runtime.batching import Batcher
from signoff_runtime.metrics import BATCHES_SPLIT
from signoff_runtime.savepoints import Then, Undo, consume_each
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS, Topology
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

KEY = "proposals.outcomes"  # any queue will do: the test's broker user may send to this one
pytestmark = pytest.mark.integration


@dataclass
class _Seen:
    """What a message's after-commit action found: its row committed, its delivery unacked."""

    committed: bool
    acked: bool


@dataclass
class _Table:
    """Each message's id and body as a row. ``gate`` holds its batch until ``opened``; ``undo``
    writes, then undoes itself (``Undo``) and is still answered; ``boom`` writes, then raises,
    and is recorded alone (body ``alone``)."""

    engine: AsyncEngine
    name: str = field(default_factory=lambda: f"savepoint_{new_id('t')[-10:].lower()}")
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    gated: asyncio.Event = field(default_factory=asyncio.Event)
    answered: dict[str, _Seen] = field(default_factory=dict)
    after_commit: list[str] = field(default_factory=list)

    async def create(self) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                text(f"CREATE TABLE {self.name} (message_id text, body text, tx text)")
            )

    async def each(self, tx: UnitOfWork, msg: RabbitMessage) -> Then:
        message_id, body = str(msg.message_id), bytes(msg.body).decode()
        if body == "gate":
            self.gated.set()
            await self.opened.wait()
        await self._insert(tx, message_id, body)
        tx.after_commit(lambda: self.after_commit.append(message_id))
        then = self._then(msg)
        if body == "undo":
            raise Undo(then)
        if body == "boom":
            raise RuntimeError("an approval that fails unexpectedly")
        return then

    async def alone(self, msg: RabbitMessage) -> None:
        async with unit_of_work(self.engine) as tx:
            await self._insert(tx, str(msg.message_id), "alone")

    async def _insert(self, tx: UnitOfWork, message_id: str, body: str) -> None:
        await tx.conn.execute(
            text(f"INSERT INTO {self.name} VALUES (:m, :b, pg_current_xact_id()::text)"),
            {"m": message_id, "b": body},
        )

    def _then(self, msg: RabbitMessage) -> Then:
        async def then() -> None:
            committed = await self.rows([str(msg.message_id)])
            seen = _Seen(bool(committed), acked=msg.raw_message.processed)
            self.answered[str(msg.message_id)] = seen

        return then

    async def rows(self, message_ids: Sequence[str]) -> list[Any]:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                text(f"SELECT message_id, body, tx FROM {self.name} WHERE message_id = ANY(:ids)"),
                {"ids": list(message_ids)},
            )
            return list(found)


@dataclass
class _Consumer:
    broker: RabbitBroker
    batcher: Batcher
    table: _Table
    topology: Topology

    async def send(self, body: str) -> str:
        message_id = new_id("msg")
        await self.broker.publish(
            body.encode(),
            exchange=self.topology.name("outcomes"),
            routing_key=ROUTING_KEYS[KEY],
            message_id=message_id,
            persist=True,
            user_id="guest",
        )
        return message_id


@pytest_asyncio.fixture(loop_scope="session")
async def savepointed(
    engine: AsyncEngine, amqp_url: str, topology: Topology
) -> AsyncIterator[_Consumer]:
    table = _Table(engine)
    await table.create()
    broker = RabbitBroker(amqp_url)
    senders = Senders.from_amqp(AmqpSettings(url=amqp_url))
    batcher = consume_each(
        broker,
        topology,
        senders,
        KEY,
        table.each,
        alone=table.alone,
        engine=engine,
        prefetch=32,
        size=8,
    )
    assert batcher is not None
    async with broker:
        await broker.start()
        yield _Consumer(broker, batcher, table, topology)
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TABLE {table.name}"))


async def test_each_message_is_undone_alone_and_the_rest_commit_together(
    savepointed: _Consumer,
) -> None:
    table = savepointed.table
    gate = await savepointed.send("gate")
    await asyncio.wait_for(table.gated.wait(), 15)
    split = BATCHES_SPLIT.labels(queue=KEY)._value.get()
    ok = [await savepointed.send("a"), await savepointed.send("b")]
    undo = await savepointed.send("undo")
    boom = await savepointed.send("boom")
    ok.append(await savepointed.send("c"))

    async def all_waiting() -> bool:
        return savepointed.batcher.waiting == 5

    await wait_until(all_waiting, what="5 deliveries waiting")
    table.opened.set()

    async def settled() -> bool:
        return len(await table.rows([gate, *ok, boom])) == 5 and undo in table.answered

    await wait_until(settled, what="the batch and the failed message settled")

    rows = {row.message_id: row for row in await table.rows([*ok, undo, boom])}
    assert undo not in rows  # its savepoint rolled back, and it was answered all the same
    assert len({rows[m].tx for m in ok}) == 1  # the rest: one transaction
    assert (rows[boom].body, rows[boom].tx != rows[ok[0]].tx) == ("alone", True)
    # answered once the batch had committed, before its ack; nothing of an undone part ran
    assert {m: table.answered[m] for m in [*ok, undo]} == {
        m: _Seen(committed=m != undo, acked=False) for m in [*ok, undo]
    }
    assert boom not in table.answered
    assert sorted(table.after_commit) == sorted([gate, *ok])
    assert BATCHES_SPLIT.labels(queue=KEY)._value.get() == split  # the batch itself held
