"""Group commit (``signoff_runtime.batching``): the deliveries at hand in one transaction.

First the ``Batcher`` alone, with stand-in messages: who leads which batch, its size, a split,
a cancelled delivery. Then a batching consumer on real RabbitMQ and PostgreSQL, with a work that
records each message's id in a table: which transaction recorded a row is its ``xmin``, so "one
commit" is read from the rows themselves. A ``gate`` message holds its batch open until the test
lets it go, so the messages sent meanwhile are known to wait for the next batch together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import aio_pika
import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from signoff_contracts.ids import new_id
from signoff_runtime.batching import Batcher, consume_batched
from signoff_runtime.consumer import PermanentError
from signoff_runtime.metrics import BATCH_SIZE, BATCHES_SPLIT, MESSAGES_CONSUMED
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS, Topology
from signoff_runtime.unit_of_work import UnitOfWork
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

KEY = "proposals.outcomes"  # any queue will do: the test's broker user may send to this one


# -- the Batcher alone ------------------------------------------------------------------------


@dataclass(eq=False)
class _Msg:
    name: str
    acked: bool = False

    async def ack(self) -> None:
        self.acked = True


@dataclass
class _Work:
    """Records each batch's names; a batch holding ``hold`` waits for ``release``; one holding
    ``fail`` raises."""

    batches: list[list[str]] = field(default_factory=list)
    alone: list[str] = field(default_factory=list)
    holding: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, messages: Sequence[RabbitMessage]) -> None:
        names = [cast("Any", m).name for m in messages]
        self.batches.append(names)
        if "hold" in names:
            self.holding.set()
            await self.release.wait()
        if "fail" in names:
            raise RuntimeError("a poison message")

    async def settle_alone(self, msg: RabbitMessage) -> None:
        self.alone.append(cast("Any", msg).name)


def _batcher(work: _Work, size: int = 3, refuse: str = "") -> Batcher:
    return Batcher(
        "unit",
        size=size,
        run=work.run,
        alone=work.settle_alone,
        accepts=lambda m: cast("Any", m).name != refuse,
    )


def _msg(name: str) -> RabbitMessage:
    return cast("RabbitMessage", _Msg(name))


async def _held(batcher: Batcher, work: _Work, names: list[str]) -> list[asyncio.Task[None]]:
    """A held first batch, and ``names`` waiting behind it."""
    first = asyncio.create_task(batcher.submit(_msg("hold")))
    await asyncio.wait_for(work.holding.wait(), 5)
    rest = [asyncio.create_task(batcher.submit(_msg(n))) for n in names]

    async def all_waiting() -> bool:
        return batcher.waiting == len(names)

    await wait_until(all_waiting, what="the deliveries to wait")
    return [first, *rest]


async def test_a_lone_delivery_is_a_batch_of_one_at_once() -> None:
    work = _Work()
    msg = _msg("a")
    await _batcher(work).submit(msg)
    assert work.batches == [["a"]] and cast("Any", msg).acked


async def test_what_arrives_during_a_batch_is_the_next_batches_at_most_size_each() -> None:
    work, names = _Work(), ["b", "c", "d", "e", "f"]
    batcher = _batcher(work, size=3)
    tasks = await _held(batcher, work, names)
    work.release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert work.batches == [["hold"], ["b", "c", "d"], ["e", "f"]]
    assert batcher.waiting == 0 and work.alone == []


async def test_a_failed_batch_is_settled_message_by_message_and_the_next_goes_on() -> None:
    work = _Work()
    batcher = _batcher(work, size=3)
    tasks = await _held(batcher, work, ["b", "fail", "d", "e"])
    work.release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert work.batches == [["hold"], ["b", "fail", "d"], ["e"]]
    assert sorted(work.alone) == ["b", "d", "fail"]


async def test_a_refused_sender_is_settled_alone_and_its_neighbours_batched() -> None:
    work = _Work()
    batcher = _batcher(work, refuse="x")
    tasks = await _held(batcher, work, ["b", "x", "d"])
    work.release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert work.batches == [["hold"], ["b", "d"]] and work.alone == ["x"]


async def test_a_cancelled_delivery_leaves_the_queue_and_the_rest_go_on() -> None:
    work = _Work()
    batcher = _batcher(work)
    first, b, c, d = await _held(batcher, work, ["b", "c", "d"])
    b.cancel()  # its channel closed: it will be redelivered, not handled here
    with contextlib.suppress(asyncio.CancelledError):
        await b
    assert batcher.waiting == 2
    work.release.set()
    await asyncio.wait_for(asyncio.gather(first, c, d), 5)
    assert work.batches == [["hold"], ["c", "d"]]


async def test_a_cancelled_batch_releases_its_deliveries_and_hands_on_the_lead() -> None:
    work = _Work()
    batcher = _batcher(work, size=2)
    first = asyncio.create_task(batcher.submit(_msg("hold")))
    await asyncio.wait_for(work.holding.wait(), 5)
    later = asyncio.create_task(batcher.submit(_msg("later")))
    await wait_until(lambda: _true(batcher.waiting == 1), what="one waiting")
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await asyncio.wait_for(later, 5)
    assert work.batches == [["hold"], ["later"]] and batcher.waiting == 0


async def _true(value: bool) -> bool:
    return value


# -- a batching consumer on RabbitMQ and PostgreSQL ---------------------------------------------


@dataclass
class _Table:
    """The consumer's work: each message's id and body as a row (a redelivered id changes
    nothing). ``gate`` holds its batch until ``opened``; ``poison`` is dead-lettered; a body
    ``transient:N`` fails with a transient error the first N times it is handled."""

    engine: AsyncEngine
    name: str = field(default_factory=lambda: f"batch_{new_id('t')[-10:].lower()}")
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    gated: asyncio.Event = field(default_factory=asyncio.Event)
    failures: dict[str, int] = field(default_factory=dict)

    async def create(self) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                text(f"CREATE TABLE {self.name} (message_id text PRIMARY KEY, body text)")
            )

    async def work(self, tx: UnitOfWork, messages: Sequence[RabbitMessage]) -> None:
        for msg in messages:
            body = bytes(msg.body).decode()
            if body == "gate":
                self.gated.set()
                await self.opened.wait()
            if body == "poison":
                raise PermanentError("poison", "a message that can never be recorded")
            if body.startswith("transient:"):
                failed = self.failures.get(str(msg.message_id), 0)
                if failed < int(body.split(":")[1]):
                    self.failures[str(msg.message_id)] = failed + 1
                    raise TimeoutError("the database did not answer in time")
            await tx.conn.execute(
                text(f"INSERT INTO {self.name} VALUES (:m, :b) ON CONFLICT DO NOTHING"),
                {"m": msg.message_id, "b": body},
            )

    async def transactions(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which transaction recorded each of ``message_ids`` (its row's ``xmin``)."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                text(
                    f"SELECT message_id, xmin::text AS tx FROM {self.name} "
                    "WHERE message_id = ANY(:ids)"
                ),
                {"ids": list(message_ids)},
            )
            return {row.message_id: row.tx for row in rows}

    async def recorded(self, message_ids: Sequence[str]) -> None:
        async def probe() -> bool:
            return len(await self.transactions(message_ids)) == len(set(message_ids))

        await wait_until(probe, what=f"{len(message_ids)} row(s)")


@dataclass
class _Consumer:
    broker: RabbitBroker
    batcher: Batcher
    table: _Table
    topology: Topology

    async def send(self, body: str, message_id: str | None = None, **kw: Any) -> str:
        message_id = message_id or new_id("msg")
        await self.broker.publish(
            body.encode(),
            exchange=self.topology.name("outcomes"),
            routing_key=ROUTING_KEYS[KEY],
            message_id=message_id,
            persist=True,
            **{"user_id": "guest", **kw},
        )
        return message_id

    async def gate(self) -> str:
        """Send the gate and wait until its batch holds."""
        gate = await self.send("gate")
        await asyncio.wait_for(self.table.gated.wait(), 15)
        return gate

    async def all_waiting(self, count: int) -> None:
        async def probe() -> bool:
            return self.batcher.waiting == count

        await wait_until(probe, what=f"{count} deliveries waiting")


@pytest_asyncio.fixture(loop_scope="session")
async def batching(
    engine: AsyncEngine, amqp_url: str, topology: Topology
) -> AsyncIterator[_Consumer]:
    table = _Table(engine)
    await table.create()
    broker = RabbitBroker(amqp_url)
    senders = Senders.from_amqp(AmqpSettings(url=amqp_url))
    batcher = consume_batched(
        broker, topology, senders, KEY, table.work, engine=engine, prefetch=32, size=8
    )
    assert batcher is not None
    async with broker:
        await broker.start()
        yield _Consumer(broker, batcher, table, topology)
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TABLE {table.name}"))


def _sizes() -> tuple[float, float]:
    """(batches, messages) the batching consumer of ``KEY`` has flushed so far."""
    found = {s.name: s.value for s in next(iter(BATCH_SIZE.labels(queue=KEY).collect())).samples}
    return found["signoff_consumer_batch_size_count"], found["signoff_consumer_batch_size_sum"]


integration = pytest.mark.integration


@integration
async def test_a_lone_message_is_recorded_at_once_in_a_batch_of_one(batching: _Consumer) -> None:
    batches, messages = _sizes()
    message_id = await batching.send("alone")
    await batching.table.recorded([message_id])
    assert _sizes() == (batches + 1, messages + 1)  # flushed by itself: nothing else was there


@integration
async def test_messages_that_arrive_together_are_recorded_in_one_transaction(
    batching: _Consumer,
) -> None:
    gate = await batching.gate()
    ids = [await batching.send(f"m{i}") for i in range(12)]
    await batching.all_waiting(12)
    batches, messages = _sizes()
    batching.table.opened.set()
    await batching.table.recorded([gate, *ids])

    recorded = await batching.table.transactions([gate, *ids])
    first, second = set(recorded[i] for i in ids[:8]), set(recorded[i] for i in ids[8:])
    assert len(first) == 1 and len(second) == 1  # eight (the batch size), then the four left
    assert len({recorded[gate], *first, *second}) == 3
    assert _sizes() == (batches + 2, messages + 12)


@integration
async def test_a_poison_message_is_dead_lettered_and_its_neighbours_recorded(
    batching: _Consumer, amqp_url: str
) -> None:
    gate = await batching.gate()
    split = BATCHES_SPLIT.labels(queue=KEY)._value.get()
    good = [await batching.send(f"n{i}") for i in range(2)]
    poison = await batching.send("poison")
    good += [await batching.send(f"n{i}") for i in range(2, 4)]
    await batching.all_waiting(5)
    batching.table.opened.set()
    await batching.table.recorded([gate, *good])

    [dead] = await _dead_letters(amqp_url, batching.topology)
    assert (dead.message_id, dead.headers["x-signoff-reason"]) == (poison, "poison")
    assert dead.headers["x-signoff-detail"] == "a message that can never be recorded"
    assert BATCHES_SPLIT.labels(queue=KEY)._value.get() == split + 1
    recorded = await batching.table.transactions(good)
    assert len(set(recorded.values())) == 4  # after the split, each in a transaction of its own
    assert poison not in await batching.table.transactions([poison])


@integration
async def test_a_transient_failure_in_a_batch_is_requeued_and_recorded_once(
    batching: _Consumer,
) -> None:
    await batching.gate()
    retried = MESSAGES_CONSUMED.labels(queue=KEY, result="retried")._value.get()
    # fails in the batch and once more alone: requeued, then recorded on its redelivery
    flaky = await batching.send("transient:2")
    steady = await batching.send("steady")
    await batching.all_waiting(2)
    batching.table.opened.set()
    await batching.table.recorded([flaky, steady])

    assert MESSAGES_CONSUMED.labels(queue=KEY, result="retried")._value.get() == retried + 1
    assert batching.table.failures[flaky] == 2


@integration
async def test_a_message_without_a_sender_is_refused_and_its_neighbours_batched(
    batching: _Consumer, amqp_url: str
) -> None:
    gate = await batching.gate()
    good = [await batching.send("a"), await batching.send("b")]
    stranger = await batching.send("who?", user_id=None)
    await batching.all_waiting(3)
    batching.table.opened.set()
    await batching.table.recorded([gate, *good])

    [dead] = await _dead_letters(amqp_url, batching.topology)
    assert (dead.message_id, dead.headers["x-signoff-reason"]) == (stranger, "unexpected_sender")
    assert len(set((await batching.table.transactions(good)).values())) == 1


async def _dead_letters(amqp_url: str, topology: Topology) -> list[Any]:
    taken: list[Any] = []
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(topology.dlq(KEY), ensure=True)

        async def take() -> bool:
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                taken.append(message)
            return bool(taken)

        await wait_until(take, what="a dead letter")
    return taken
