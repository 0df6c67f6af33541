"""``Requester``: many requests in flight at once, each answered with its own reply.

FastStream's ``broker.request`` holds a lock for the whole round trip; the responder here only
answers once it holds every request, so with one request at a time it would never answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from signoff_contracts.ids import new_id
from signoff_runtime.rpc import Requester, RequestFailed
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS, Topology
from yarl import URL

pytestmark = pytest.mark.integration
KEY = "proposals.requests"


@contextlib.asynccontextmanager
async def _responder(amqp_url: str, topology: Topology, expect: int) -> AsyncIterator[None]:
    """Collect ``expect`` requests, then answer them in reverse order, echoing each body."""
    connection = await aio_pika.connect(amqp_url)
    held: list[AbstractIncomingMessage] = []
    all_held = asyncio.Event()

    async def hold(message: AbstractIncomingMessage) -> None:
        held.append(message)
        if len(held) == expect:
            all_held.set()

    async def answer() -> None:
        await all_held.wait()
        for message in reversed(held):
            await channel.default_exchange.publish(
                aio_pika.Message(b"re:" + message.body, correlation_id=message.correlation_id),
                routing_key=str(message.reply_to),
            )
            await message.ack()

    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(topology.name(KEY), ensure=False)
        tag = await queue.consume(hold)
        answering = asyncio.create_task(answer())
        try:
            yield
        finally:
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
            await queue.cancel(tag)


async def _ask(requester: Requester, topology: Topology, body: bytes, timeout: float) -> bytes:
    reply = await requester.request(
        body,
        exchange=topology.name("commands"),
        routing_key=ROUTING_KEYS[KEY],
        correlation_id=new_id("cor"),
        message_id=new_id("msg"),
        timeout=timeout,
    )
    return reply.body


async def test_concurrent_requests_are_all_in_flight_and_each_gets_its_own_answer(
    amqp_url: str, topology: Topology
) -> None:
    bodies = [f"request-{i}".encode() for i in range(5)]
    async with Requester(amqp_url, app_id="test") as requester:
        async with _responder(amqp_url, topology, expect=len(bodies)):
            answers = await asyncio.gather(*(_ask(requester, topology, b, 15.0) for b in bodies))
    assert answers == [b"re:" + b for b in bodies]


async def test_no_answer_in_time_is_a_timeout(amqp_url: str, topology: Topology) -> None:
    async with Requester(amqp_url, app_id="test") as requester:
        with pytest.raises(TimeoutError):
            await _ask(requester, topology, b"nobody answers", 0.5)


async def test_a_request_nothing_is_bound_to_fails_at_once(
    amqp_url: str, topology: Topology
) -> None:
    async with Requester(amqp_url, app_id="test") as requester:
        with pytest.raises(RequestFailed):
            await requester.request(
                b"{}",
                exchange=topology.name("commands"),
                routing_key="nobody.is.bound.here",
                correlation_id=new_id("cor"),
                message_id=new_id("msg"),
                timeout=10.0,
            )


async def test_a_broker_that_cannot_be_reached_is_a_request_failed(topology: Topology) -> None:
    """Not an unexpected error (which the agent would answer 500): callers answer 503."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # nothing listens once the socket closes
    async with Requester(f"amqp://guest:guest@127.0.0.1:{closed_port}/", app_id="test") as rq:
        with pytest.raises(RequestFailed):
            await rq.request(
                b"{}",
                exchange=topology.name("commands"),
                routing_key=ROUTING_KEYS["proposals.requests"],
                correlation_id=new_id("cor"),
                message_id=new_id("msg"),
                timeout=10.0,
            )


class _Cuttable:
    """A TCP relay to the broker whose connections can all be reset at once (a broker restart,
    as the requester sees it)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.writers += [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


async def test_a_lost_connection_fails_its_waiting_requests_and_the_next_request_reconnects(
    amqp_url: str, topology: Topology
) -> None:
    url = URL(amqp_url)
    relay = _Cuttable((url.host or "127.0.0.1", url.port or 5672))
    port = await relay.start()
    try:
        async with Requester(str(url.with_port(port)), app_id="test") as requester:
            async with _responder(amqp_url, topology, expect=1):
                assert await _ask(requester, topology, b"before", 15.0) == b"re:before"
            waiting = asyncio.create_task(_ask(requester, topology, b"unanswered", 60.0))

            async def in_flight() -> bool | None:
                return len(requester._waiting) == 1 or None

            await wait_until(in_flight, timeout=10, what="the request in flight")
            first = requester._connection
            relay.cut()
            with pytest.raises(RequestFailed):  # at once, not after its 60 s
                await asyncio.wait_for(waiting, 15.0)
            await _purge(amqp_url, topology)  # the request nobody answered is still queued
            async with _responder(amqp_url, topology, expect=1):
                assert await _ask(requester, topology, b"after", 15.0) == b"re:after"
            # the lost one was closed, not left for the collector to close outside a loop
            assert first is not None and first is not requester._connection and first.is_closed
    finally:
        await relay.close()


async def _purge(amqp_url: str, topology: Topology) -> None:
    async with await aio_pika.connect(amqp_url) as connection:
        channel = await connection.channel()
        await (await channel.get_queue(topology.name(KEY), ensure=False)).purge()
