"""What the declared topology routes where, on a real RabbitMQ: a conversation's facts reach the
agent and every reader of ``events``; the rest reach those readers only; and declaring over an
earlier version's topology removes the bindings it retired (so the agent gets no second copy)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import aio_pika
import pytest
import pytest_asyncio
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import RETIRED_BINDINGS, Topology, events_exchange

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(loop_scope="session")
async def channel(amqp_url: str) -> AsyncIterator[aio_pika.abc.AbstractChannel]:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        yield await connection.channel(publisher_confirms=True, on_return_raises=True)


@pytest_asyncio.fixture(loop_scope="session")
async def earlier(channel: aio_pika.abc.AbstractChannel) -> AsyncIterator[Topology]:
    """A topology as an earlier version left it: the agent's queue bound to ``events``."""
    topo = Topology(f"t{secrets.token_hex(4)}", delivery_limit=3)
    for key, exchange, routing_key in RETIRED_BINDINGS:
        source = await channel.declare_exchange(topo.name(exchange), type="topic", durable=True)
        queue = await channel.declare_queue(
            topo.name(key), durable=True, arguments=topo.queue_arguments(key)
        )
        await queue.bind(source, routing_key=routing_key)
    yield topo
    await topo.delete(channel)


async def _publish(
    channel: aio_pika.abc.AbstractChannel, topo: Topology, key: str, conversation: str | None
) -> bytes:
    exchange = await channel.get_exchange(topo.name(events_exchange(conversation)), ensure=False)
    body = f"{key} {conversation}".encode()
    await exchange.publish(aio_pika.Message(body), routing_key=key, mandatory=True)
    return body


async def _taken(channel: aio_pika.abc.AbstractChannel, name: str, into: list[bytes]) -> None:
    queue = await channel.get_queue(name, ensure=False)
    while (message := await queue.get(no_ack=True, fail=False)) is not None:
        into.append(message.body)


async def test_declared_over_an_earlier_topology_each_fact_goes_where_it_is_read(
    channel: aio_pika.abc.AbstractChannel, earlier: Topology
) -> None:
    topo = earlier
    await topo.declare(channel)
    await topo.declare(channel)  # at every start-up: the retired bindings are gone already
    reader = await channel.declare_queue(exclusive=True)  # a third party's
    await reader.bind(topo.name("events"), routing_key="#")
    chat = [
        await _publish(channel, topo, "proposal.created", "cnv_1"),
        await _publish(channel, topo, "proposal.outcome", "cnv_1"),
        await _publish(channel, topo, "pause_point.resolved", "cnv_1"),
    ]
    machine = [
        await _publish(channel, topo, "proposal.created", None),
        await _publish(channel, topo, "proposal.outcome", None),
        await _publish(channel, topo, "pause_point.resolved", None),
    ]
    read: list[bytes] = []

    async def all_read() -> bool:
        await _taken(channel, reader.name, read)
        return len(read) >= 6

    # publishes route at once: once the reader has all six, every queue has what it will get
    await wait_until(all_read, what="every fact on a reader of events")
    agent: list[bytes] = []
    notifier: list[bytes] = []
    await _taken(channel, topo.name("agent.events"), agent)
    await _taken(channel, topo.name("proposals.notifications"), notifier)
    assert sorted(read) == sorted(chat + machine)
    assert agent == chat  # once each, in order: no second copy through ``events``
    # the notifier: ``created`` (e-mail) and what webhooks bind (none here), proposals' only
    assert notifier == [chat[0], machine[0]]
