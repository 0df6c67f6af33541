"""Request-reply over AMQP with any number of requests in flight.

FastStream's ``broker.request`` holds one lock per broker for the whole round trip (publish,
then wait for the answer), so concurrent HTTP requests that each ask another service queue
behind one another: one agent process stored one proposal at a time. ``Requester`` keeps one
channel that consumes RabbitMQ's direct reply-to pseudo-queue and publishes every request on that
same channel (direct reply-to requires both on one channel); answers are matched to waiting
callers by correlation id. An answer nobody waits for any more (its caller timed out) is dropped.

Requests are persistent, mandatory and confirmed: a request that no queue is bound to fails at
once instead of waiting out its timeout. The current trace travels in the ``traceparent`` header,
the requester's broker user in ``user_id`` (the replier refuses a request without it). Asking
needs no permission beyond writing to the request's exchange: RabbitMQ lets any user consume its
own channel's reply-to pseudo-queue (checked on 3.10); it is the replier that writes to
``amq.default``.

The connection is a plain one, opened again by the next request once it (or its channel) is lost:
aio-pika's robust reconnection restores the reply-to consumer on a channel it reopens, and after a
broker restart that restore was seen to fail over and over (``CHANNEL_ERROR - expected
'channel.open'``) while every request waited out its timeout on the half-restored channel for
minutes. A lost connection also fails the requests waiting on it at once (``RequestFailed``):
their replies could only have come on that channel.

Both sides of the protocol live here: ``Requester.ask`` sends an envelope and parses the typed
answer; ``answer`` is how a replier publishes one (after its commit, to the request's reply
address, with the request's correlation id).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import TypeVar

import aio_pika
import structlog
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    DeliveryMode,
)
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from pydantic import BaseModel
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import Envelope

from signoff_runtime import failover, tracing
from signoff_runtime.settings import broker_user
from signoff_runtime.topology import ROUTING_KEYS, Topology

log = structlog.get_logger(__name__)
REPLY_TO = "amq.rabbitmq.reply-to"
A = TypeVar("A", bound=BaseModel)


class RequestFailed(Exception):
    """The request could not be published (broker unreachable, nothing bound to its key)."""


class Unanswered(Exception):
    """No answer to ``message_id``: it could not be sent, or no reply came in time. What it asked
    for may or may not have been done (the replier dedups on the message id)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id


class Requester:
    """Opened lazily on the first request; ``close`` (or ``async with``) at shutdown."""

    def __init__(self, amqp_url: str, *, app_id: str) -> None:
        self._url = amqp_url
        self._user = broker_user(amqp_url)
        self._app_id = app_id
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._opening = asyncio.Lock()
        self._waiting: dict[str, asyncio.Future[AbstractIncomingMessage]] = {}

    async def __aenter__(self) -> Requester:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for waiting in self._waiting.values():
            waiting.cancel()
        self._waiting.clear()
        await self._drop()

    async def _drop(self) -> None:
        """Forget the connection (closing it if it is still open): the next request opens one;
        the requests waiting on it fail now, as their replies could only come on it."""
        connection, self._connection, self._channel = self._connection, None, None
        self._fail_waiting("connection dropped")
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):
                await connection.close()

    def _lost(self, sender: object, *_: object) -> None:
        """The current channel or connection closed under us (a stale one's news is ignored)."""
        if sender is not self._channel and sender is not self._connection:
            return
        self._channel = None
        self._fail_waiting("channel closed")

    def _fail_waiting(self, why: str) -> None:
        for correlation_id, waiting in list(self._waiting.items()):
            if not waiting.done():
                waiting.set_exception(RequestFailed(f"{why} before the reply to {correlation_id}"))

    async def ask(
        self, message: Envelope, answer: type[A], topology: Topology, queue_key: str, timeout: float
    ) -> A:
        """Send ``message`` to ``queue_key`` and parse its reply as ``answer``; ``Unanswered``
        when it cannot be sent or no reply comes within ``timeout`` seconds."""
        try:
            response = await self.request(
                message.model_dump_json().encode(),
                exchange=topology.name(topology.spec(queue_key).exchange),
                routing_key=ROUTING_KEYS[queue_key],
                message_id=message.message_id,
                # unique per request: two requests may carry one message id (a retry)
                correlation_id=new_id("cor"),
                message_type=message.type,
                timeout=timeout,
            )
        except (TimeoutError, RequestFailed) as exc:
            raise Unanswered(message.message_id) from exc
        return answer.model_validate_json(response.body)

    async def request(
        self,
        body: bytes,
        *,
        exchange: str,
        routing_key: str,
        correlation_id: str,
        message_id: str,
        message_type: str | None = None,
        timeout: float,
    ) -> AbstractIncomingMessage:
        """Publish ``body`` and wait for the answer carrying ``correlation_id``.

        Raises ``TimeoutError`` when none arrives in ``timeout`` seconds and ``RequestFailed``
        when the request was not accepted by the broker.
        """
        async with asyncio.timeout(timeout):
            try:
                channel = await self._open()
            except (aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
                # a broker restarting: aio-pika says "Connection was not opened" (RuntimeError)
                raise RequestFailed(repr(exc)) from exc
            answer: asyncio.Future[AbstractIncomingMessage]
            if correlation_id in self._waiting:
                # two callers would wait for one answer: the second would never hear its own
                raise ValueError(f"a request with correlation id {correlation_id} is in flight")
            answer = asyncio.get_running_loop().create_future()
            self._waiting[correlation_id] = answer
            try:
                target = await channel.get_exchange(exchange, ensure=False)
                message = aio_pika.Message(
                    body,
                    content_type="application/json",
                    delivery_mode=DeliveryMode.PERSISTENT,
                    message_id=message_id,
                    correlation_id=correlation_id,
                    type=message_type,
                    reply_to=REPLY_TO,
                    # a request nobody took in time is worth nothing (the caller gave up), and
                    # its reply-to may name a channel on a node that has since died: replying
                    # there closes the replier's connection (541) on RabbitMQ 3.10, again on
                    # every redelivery, until that node is back. It expires instead.
                    expiration=timeout,
                    app_id=self._app_id,
                    user_id=self._user,
                    headers=dict(tracing.headers()),
                )
                try:
                    await target.publish(message, routing_key=routing_key, mandatory=True)
                except aio_pika.exceptions.DeliveryError as exc:  # returned: nothing bound
                    raise RequestFailed(repr(exc)) from exc
                except (aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
                    await self._drop()
                    raise RequestFailed(repr(exc)) from exc
                return await answer
            finally:
                self._waiting.pop(correlation_id, None)

    async def _open(self) -> AbstractChannel:
        async with self._opening:
            if self._channel is not None and not self._channel.is_closed:
                return self._channel
            if self._connection is not None and not self._connection.connected.is_set():
                # it died under us (``_lost``): closed here, not dropped open for the collector
                # to close outside any loop
                await self._drop()
            fresh = self._connection is None
            try:
                self._channel = await self._reply_channel()
            except (aio_pika.exceptions.AMQPError, OSError, RuntimeError):
                await self._drop()
                if fresh:
                    raise
                # the connection died and has not said so yet: once more, on a new one
                self._channel = await self._reply_channel()
            return self._channel

    async def _reply_channel(self) -> AbstractChannel:
        """A confirming channel consuming the reply-to pseudo-queue (a connection if needed)."""
        if self._connection is None:
            self._connection = await failover.connect(self._url)
            self._connection.close_callbacks.add(self._lost)
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        channel.close_callbacks.add(self._lost)
        replies = await channel.get_queue(REPLY_TO, ensure=False)
        await replies.consume(self._answered, no_ack=True)
        return channel

    async def _answered(self, message: AbstractIncomingMessage) -> None:
        waiting = self._waiting.get(message.correlation_id or "")
        if waiting is None or waiting.done():
            log.info("rpc.late_reply", correlation_id=message.correlation_id)
            return
        waiting.set_result(message)


async def answer(
    broker: RabbitBroker, request: RabbitMessage, reply: Envelope, *, user_id: str, timeout: float
) -> None:
    """Publish ``reply`` to the address ``request`` left (nothing when it left none), under the
    request's correlation id, as broker user ``user_id``
    (RabbitMQ refuses a ``user_id`` that is not the connection's own)."""
    if not request.reply_to:
        return
    await broker.publish(
        reply.model_dump_json().encode(),
        routing_key=request.reply_to,
        correlation_id=request.raw_message.correlation_id,
        message_id=reply.message_id,
        message_type=reply.type,
        content_type="application/json",
        user_id=user_id,
        timeout=timeout,
    )
