"""A closed channel cancels a delivery, not the work it began (``consumer.carried_through``).

aiormq cancels a channel's consumer tasks when the channel closes. Before the work was carried
through, a broker blip cut the executor between committing an attempt and calling the provider,
and the reconciler could only find that attempt "never applied" (the 4-broker fault scenario's
``revision_required``). Here a real consumer on RabbitMQ holds a delivery's work open, the test
closes the delivery's channel under it, and the work still ends; unacknowledged, the delivery
comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from signoff_contracts.ids import new_id
from signoff_runtime import consumer
from signoff_runtime.consumer import carried_through, consume, finish
from signoff_runtime.metrics import MESSAGES_CONSUMED
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS, Topology

KEY = "proposals.outcomes"  # any queue will do: the test's broker user may send to this one
pytestmark = pytest.mark.integration


@dataclass
class _Held:
    """The first delivery of each message holds its work until ``release``; later ones return
    at once. ``ended`` lists the works that ran to their end, ``deliveries`` every delivery."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    holding: dict[str, RabbitMessage] = field(default_factory=dict)
    deliveries: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)

    async def work(self, msg: RabbitMessage) -> None:
        message_id = str(msg.message_id)
        self.deliveries.append(message_id)
        if message_id not in self.holding:
            self.holding[message_id] = msg
            await self.release.wait()
        self.ended.append(message_id)


@pytest_asyncio.fixture(loop_scope="session")
async def held(amqp_url: str, topology: Topology) -> AsyncIterator[tuple[_Held, RabbitBroker]]:
    work = _Held()
    broker = RabbitBroker(amqp_url)
    senders = Senders.from_amqp(AmqpSettings(url=amqp_url))
    consume(broker, topology, senders, KEY, work.work, prefetch=4)
    async with broker:
        await broker.start()
        yield work, broker
        work.release.set()
        await finish(5.0)


async def test_work_goes_on_when_its_channel_closes_and_the_delivery_comes_back(
    held: tuple[_Held, RabbitBroker], topology: Topology
) -> None:
    work, broker = held
    message_id = new_id("msg")
    await broker.publish(
        b"{}",
        exchange=topology.name("outcomes"),
        routing_key=ROUTING_KEYS[KEY],
        message_id=message_id,
        persist=True,
        user_id="guest",
    )
    await wait_until(lambda: _now(message_id in work.holding), what="the work to hold")
    counted = MESSAGES_CONSUMED.labels(queue=KEY, result="carried_on")
    before = counted._value.get()

    await work.holding[message_id].raw_message.channel.close()  # what a broker blip does
    await wait_until(lambda: _now(consumer.carried() == 1), what="the work to be carried on")
    assert work.ended == [] and counted._value.get() == before + 1
    work.release.set()

    await wait_until(lambda: _now(message_id in work.ended), what="the carried work to end")
    assert consumer.carried() == 0
    # never acknowledged (its channel was gone): the broker delivers it again
    await wait_until(lambda: _now(work.deliveries.count(message_id) == 2), what="a redelivery")


async def test_a_cancelled_caller_leaves_the_work_running_and_finish_ends_what_outlives_it() -> (
    None
):
    started, release = asyncio.Event(), asyncio.Event()
    ended: list[str] = []

    async def slow(name: str) -> str:
        started.set()
        await release.wait()
        ended.append(name)
        return name

    caller = asyncio.create_task(carried_through(lambda: slow("a"), "unit"))
    await asyncio.wait_for(started.wait(), 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert consumer.carried() == 1
    release.set()
    await finish(5.0)
    assert ended == ["a"] and consumer.carried() == 0

    started.clear()
    release.clear()
    stuck = asyncio.create_task(carried_through(lambda: slow("b"), "unit"))
    await asyncio.wait_for(started.wait(), 5)
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    await finish(0.05)  # past its bound: cancelled, left for the broker to deliver again
    assert ended == ["a"] and consumer.carried() == 0


async def _now(value: bool) -> bool:
    return value
