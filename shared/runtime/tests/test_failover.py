"""A list of broker addresses: split and checked as a setting; connections fail over between them.

The cluster itself is the fault suite's (``tests/faults/test_cluster.py``); here two TCP
forwarders to the local broker stand for two nodes, so a node "dies" when its forwarder stops
listening and drops its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from faststream.rabbit import RabbitQueue
from pydantic import ValidationError
from signoff_runtime import failover
from signoff_runtime.settings import AmqpSettings, amqp_urls, broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import free_port
from yarl import URL


def test_a_comma_list_names_each_node_in_order() -> None:
    url = "amqp://u:p@a:5672/v, amqp://u:p@b:5673/v,amqps://u:p@c:5671/v"

    assert amqp_urls(url) == ["amqp://u:p@a:5672/v", "amqp://u:p@b:5673/v", "amqps://u:p@c:5671/v"]
    assert amqp_urls("amqp://u:p@a/") == ["amqp://u:p@a/"]


def test_one_url_may_name_several_hosts() -> None:
    url = "amqp://u:p@a:5672,b:5673, c/v?heartbeat=5"

    assert amqp_urls(url) == [
        "amqp://u:p@a:5672/v?heartbeat=5",
        "amqp://u:p@b:5673/v?heartbeat=5",
        "amqp://u:p@c/v?heartbeat=5",
    ]


def test_a_comma_in_a_password_is_no_separator() -> None:
    url = "amqp://u:pa,ss@a:5672/,amqp://u:pa,ss@b:5672/"

    assert amqp_urls(url) == ["amqp://u:pa,ss@a:5672/", "amqp://u:pa,ss@b:5672/"]
    assert broker_user(url) == "u"


@pytest.mark.parametrize(
    "url",
    ["amqp://u:p@a/,amqp://other:p@b/", "amqp://u:p@a/one,amqp://u:p@b/two"],
)
def test_nodes_with_different_users_or_vhosts_are_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="same user and vhost"):
        AmqpSettings(url=url)


def test_production_checks_the_password_of_every_node() -> None:
    strong = "Vx9-rT2qLm8-Kc4wZp7-Hs3n"
    url = f"amqp://u:{strong}@a:5672/,amqp://u:guest@b:5672/"

    assert [r for r in AmqpSettings(url=url).prod_refusals() if "SIGNOFF_AMQP__URL" in r]
    assert not [
        r
        for r in AmqpSettings(url=f"amqp://u:{strong}@a:5672,b:5672/").prod_refusals()
        if "password" in r
    ]


class Node:
    """A TCP forwarder to the real broker: one "node" of a pretend cluster."""

    def __init__(self, broker_url: str) -> None:
        target = URL(broker_url)
        self._target = (target.host or "127.0.0.1", target.port or 5672)
        self._url = target
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.connections = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return str(self._url.with_port(port))

    async def start(self) -> Node:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        return self

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            _pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True
        )

    async def die(self) -> None:
        """Stop listening and reset every connection through this node (like ``kill -9``)."""
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def queue_name(amqp_url: str) -> AsyncIterator[str]:
    name = f"t-failover-{secrets.token_hex(4)}"
    yield name
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await (await connection.channel()).queue_delete(name)


async def _publish(amqp_url: str, queue: str, body: bytes) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue)


def _now(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return check()

    return probe


def _dead_address(amqp_url: str) -> str:
    return str(URL(amqp_url).with_port(free_port()))  # nothing listens there


@pytest.mark.integration
async def test_connect_skips_a_node_that_does_not_answer(amqp_url: str) -> None:
    node = await Node(amqp_url).start()
    try:
        connection = await failover.connect(f"{_dead_address(amqp_url)},{node.url}", timeout=5)
        async with connection:
            assert not connection.is_closed
        assert node.connections == 1
    finally:
        await node.die()


@pytest.mark.integration
async def test_a_node_that_does_not_answer_leaves_no_connection_open(amqp_url: str) -> None:
    """aio-pika drops the connection whose connect failed unclosed; collected outside a loop it
    warns of a ``close()`` never awaited, in whichever test the collector happened to run."""
    dead = _dead_address(amqp_url)
    with pytest.raises(CONNECTION_EXCEPTIONS):
        await failover.connect(dead, timeout=5)
    port = URL(dead).port
    tried = [
        c
        for c in gc.get_objects()
        if isinstance(c, aio_pika.Connection) and URL(str(c.url)).port == port
    ]
    assert tried, "the failed connection was not found: this test no longer sees it"
    assert all(c.is_closed for c in tried)


@pytest.mark.integration
async def test_a_robust_connection_moves_to_the_next_node_when_its_node_dies(
    amqp_url: str, queue_name: str
) -> None:
    first, second = await Node(amqp_url).start(), await Node(amqp_url).start()
    got: list[bytes] = []

    async def take(message: AbstractIncomingMessage) -> None:
        got.append(message.body)
        await message.ack()

    connection = await failover.connect_robust(f"{first.url},{second.url}", reconnect_interval=0.2)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, durable=True)
        await queue.consume(take)
        await _publish(amqp_url, queue_name, b"before")
        await wait_until(
            _now(lambda: got == [b"before"]), timeout=10, what="delivery through node 1"
        )
        assert (first.connections, second.connections) == (1, 0)

        await first.die()
        await wait_until(
            _now(lambda: second.connections == 1), timeout=10, what="failover to node 2"
        )
        await _publish(amqp_url, queue_name, b"after")

        await wait_until(
            _now(lambda: b"after" in got), timeout=10, what="consumer restored on node 2"
        )
    finally:
        await connection.close()
        await second.die()


@pytest.mark.integration
async def test_a_faststream_broker_fails_over_and_its_subscriber_comes_back(
    amqp_url: str, queue_name: str
) -> None:
    first, second = await Node(amqp_url).start(), await Node(amqp_url).start()
    got: list[str] = []
    broker = failover.rabbit_broker(f"{first.url},{second.url}", reconnect_interval=0.2)

    @broker.subscriber(RabbitQueue(queue_name, durable=True))
    async def take(body: str) -> None:
        got.append(body)

    await broker.start()
    try:
        await _publish(amqp_url, queue_name, b"before")
        await wait_until(
            _now(lambda: got == ["before"]), timeout=10, what="delivery through node 1"
        )

        await first.die()
        await wait_until(
            _now(lambda: second.connections >= 1), timeout=10, what="failover to node 2"
        )
        await _publish(amqp_url, queue_name, b"after")

        await wait_until(_now(lambda: "after" in got), timeout=15, what="subscriber back on node 2")
        assert await broker.ping(timeout=5)
    finally:
        await broker.stop()
        await second.die()
