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
from signoff_runtime.topology import ROUTING_KEYS, Topology

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
