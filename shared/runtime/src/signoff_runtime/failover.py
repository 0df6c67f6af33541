"""Reaching a RabbitMQ cluster through the addresses of its nodes, tried in turn.

An AMQP client talks to one node; a cluster outlives the loss of a node only for the clients
that then talk to another. aio-pika, and FastStream over it, take one URL and reconnect to that
same URL for ever (aio-pika issue #141 asks for an address list; none has shipped). So
``SIGNOFF_AMQP__URL`` may name several nodes of one cluster, comma-separated, and every
connection signoff opens goes through this module:

- ``connect`` (short-lived connections: declaring the topology, status, replays) tries each
  address in turn and returns the first that answers;
- ``connect_robust`` and ``rabbit_broker`` (the long-lived ones: relays, requesters, consumers)
  plug ``FailoverConnection`` into aio-pika's own ``connection_class`` hook: each attempt of
  aio-pika's reconnect loop tries every address once, starting with the node after the one the
  connection last used, so a node that died is tried last; aio-pika then restores channels,
  queues and consumers as it does after any reconnect.

With one URL nothing changes: plain aio-pika and FastStream. A load balancer or a DNS name that
resolves to every node works too (one URL); the list is for where neither is at hand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar

import aio_pika
import structlog
from aio_pika.abc import AbstractConnection, AbstractRobustConnection, TimeoutType
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from aio_pika.robust_connection import RobustConnection
from faststream.rabbit import RabbitBroker
from yarl import URL

from signoff_runtime.settings import amqp_urls

__all__ = ["FailoverConnection", "connect", "connect_robust", "rabbit_broker", "redacted"]

log = structlog.get_logger(__name__)


def redacted(url: str | URL) -> str:
    """An address for the logs: host, port and virtual host, no credentials or query."""
    parsed = URL(str(url))
    return str(parsed.with_user(None).with_query(None))


class FailoverConnection(RobustConnection):
    """A robust connection over several nodes; subclassed per address list (``bound``)."""

    ADDRESSES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, url: URL, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any):
        super().__init__(url, loop=loop, **kwargs)
        # aio-pika put its connection parameters into the first URL's query: every node gets them
        query = self.url.query
        self._candidates = [self.url, *(URL(a).update_query(query) for a in self.ADDRESSES[1:])]
        self._last = -1

    @classmethod
    def bound(cls, urls: Sequence[str]) -> type[FailoverConnection]:
        """This class over ``urls`` (aio-pika builds the connection from the first alone)."""
        return type("FailoverConnection", (cls,), {"ADDRESSES": tuple(urls)})

    async def _RobustConnection__connect_transport(self) -> None:
        """One attempt of aio-pika's reconnect loop: every node once, the last one used last.

        This overrides ``RobustConnection.__connect_transport`` (the loop calls it through
        ``self``, so a subclass can); ``tests`` of this module fail if aio-pika renames it."""
        failure: BaseException | None = None
        attempt = getattr(super(), "_RobustConnection__connect_transport")  # noqa: B009
        for step in range(1, len(self._candidates) + 1):
            index = (self._last + step) % len(self._candidates)
            self.url = self._candidates[index]
            try:
                await attempt()
            except CONNECTION_EXCEPTIONS as exc:
                failure = exc
                log.info("amqp.node_unreachable", address=redacted(self.url), error=repr(exc))
                continue
            if self._last != -1 and index != self._last:
                log.warning("amqp.failed_over", address=redacted(self.url))
            self._last = index
            return
        assert failure is not None
        raise failure


class ClosedOnFailure(aio_pika.Connection):
    """aio-pika's plain connection, closed when its first attempt to connect fails.

    ``aio_pika.connect`` builds the connection, then connects it, and on a failure drops it
    unclosed. Collected later with no loop running (a relay retrying a node that is down, then
    anything synchronous), its ``__del__`` creates ``close()`` and cannot schedule it: a
    "coroutine was never awaited" warning, raised in whatever code the collector ran in."""

    async def connect(self, timeout: TimeoutType = None) -> None:
        try:
            await super().connect(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.close()
            raise


async def connect(url: str, *, timeout: TimeoutType = None) -> AbstractConnection:
    """A plain connection to the first of ``url``'s nodes that answers (those that did not are
    closed, not left to the collector)."""
    failure: BaseException | None = None
    for candidate in amqp_urls(url):
        try:
            return await aio_pika.connect(
                candidate, timeout=timeout, connection_class=ClosedOnFailure
            )
        except CONNECTION_EXCEPTIONS as exc:
            failure = exc
            log.info("amqp.node_unreachable", address=redacted(candidate), error=repr(exc))
    assert failure is not None
    raise failure


async def connect_robust(url: str, **kwargs: Any) -> AbstractRobustConnection:
    """aio-pika's robust connection, failing over between ``url``'s nodes if it names several."""
    urls = amqp_urls(url)
    if len(urls) > 1:
        kwargs["connection_class"] = FailoverConnection.bound(urls)
    connection: AbstractRobustConnection = await aio_pika.connect_robust(urls[0], **kwargs)
    return connection


def rabbit_broker(url: str, **kwargs: Any) -> RabbitBroker:
    """A FastStream broker whose connection fails over between ``url``'s nodes."""
    urls = amqp_urls(url)
    broker = RabbitBroker(urls[0], **kwargs)
    if len(urls) > 1:
        # FastStream passes these to ``aio_pika.connect_robust`` and has no public way to add
        # ``connection_class``; a rename in FastStream must fail loudly, not drop the failover
        connection_kwargs = vars(broker).get("_connection_kwargs")
        if not isinstance(connection_kwargs, dict) or "url" not in connection_kwargs:
            raise RuntimeError("this FastStream version keeps no _connection_kwargs: no failover")
        connection_kwargs["connection_class"] = FailoverConnection.bound(urls)
    return broker
