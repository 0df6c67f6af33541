"""Settling a delivery: ack after commit, retry what is transient, dead-letter with a reason.

FastStream's default policy rejects on *any* exception, a passing database hiccup included, so a
moment's outage would dead-letter good messages. Subscribers here run with ``AckPolicy.MANUAL``
and hand their work to ``settle``, which classifies the outcome:

- a message from a broker user the queue does not accept (``signoff_runtime.senders``), or with
  no ``user_id`` at all → dead-lettered ``unexpected_sender`` before the handler runs;
- success → ack (after the handler's transaction committed);
- ``PermanentError`` or a message that does not parse → a copy goes to the queue's ``.dlq`` with
  headers ``x-signoff-reason`` / ``x-signoff-detail``, then the original is acked: nothing lost,
  nothing looping;
- a transient error (``signoff_runtime.transient``: connection lost, pool exhausted, timeout,
  serialization conflict) → a short bounded back-off, then
  nack with requeue; each nack counts toward the quorum queue's ``x-delivery-limit``;
- any other error → nack with requeue, and on the last delivery the message is dead-lettered
  with reason ``handler_failed`` instead, so the reason is never just "delivery limit".

Work that has begun runs to its end (``carried_through``). aiormq cancels a channel's consumer
tasks when the channel closes, so a broker blip would otherwise cut a handler anywhere — the
executor's between committing an attempt and calling the provider, which leaves an attempt the
reconciler can only find "never applied". The work needs the database, not the channel: it goes
on, unacknowledged, its delivery comes back on the next channel and finds it done (or still
under way: the execution lease and dedup are built for a second copy). ``finish`` waits for such
work before a stopping service closes its pool.

``consume`` subscribes a queue's work this way (the one place a service's consumer is declared);
``raw_body`` and ``delivered`` are its parts, for a subscriber that settles by other rules (the
dead-letter archive).

A dead-letter copy is published by this consumer, so it carries this consumer's ``user_id``; it
names the message's original sender in ``x-signoff-sender`` for the archive and a later replay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitBroker
from faststream.rabbit.message import RabbitMessage
from pydantic import ValidationError
from signoff_contracts.ids import new_id

from signoff_runtime.metrics import MESSAGES_CONSUMED, MESSAGES_DEAD_LETTERED, handled
from signoff_runtime.senders import SENDER_HEADER, Senders
from signoff_runtime.topology import Topology
from signoff_runtime.transient import is_transient
from signoff_runtime.validation import summary

log = structlog.get_logger(__name__)
T = TypeVar("T")

#: work whose delivery was cancelled (its channel closed) and which is still running
_carried: set[asyncio.Future[Any]] = set()


Handler = Callable[[RabbitMessage], Awaitable[None]]


def delivered(broker: RabbitBroker, handler: Handler) -> Callable[[Any], Awaitable[None]]:
    """``handler`` as FastStream calls a subscriber (with the decoded body), given the delivery.

    FastStream keeps the delivery in its context for the message's duration; reading it there
    is a dictionary lookup. Asked for in the signature (``Context("message")``) it cost a task
    group and a task per message in fast_depends, and FastStream's own ``RabbitMessage``
    annotation a worker-thread hand-off besides (issue 18, ``signoff_bench.subscriber``).
    """
    deliveries = broker.context

    async def call(body: Any) -> None:
        await handler(deliveries.get_local("message"))

    call.__name__ = call.__qualname__ = handler.__name__
    return call


async def raw_body(msg: Any) -> Any:
    """A subscriber's ``decoder``: keep the body as bytes, for the handler to parse (and
    dead-letter with a reason). Asynchronous, since FastStream runs a synchronous decoder in a
    worker thread."""
    return msg.body


def consume(
    broker: RabbitBroker,
    topology: Topology,
    senders: Senders,
    queue_key: str,
    work: Callable[[RabbitMessage], Awaitable[object]],
    *,
    prefetch: int,
    bind: bool = False,
) -> None:
    """Subscribe ``work`` to the queue ``queue_key``: at most ``prefetch`` unacknowledged
    deliveries, the body left as bytes for ``work`` to parse, no reply of FastStream's own, and
    each delivery settled by ``settle``. ``bind`` also binds the queue to its exchange (the
    topology binds it already; a service that declares its own consumers' bindings asks)."""

    handler = settling(broker, topology, senders, queue_key, work)
    subscribe(broker, topology, queue_key, handler, prefetch=prefetch, bind=bind)


def subscribe(
    broker: RabbitBroker,
    topology: Topology,
    queue_key: str,
    handler: Handler,
    *,
    prefetch: int,
    bind: bool = False,
) -> None:
    """Subscribe ``handler`` to ``queue_key`` as ``consume`` does (and ``signoff_runtime.batching``
    for its batches): manual acks, ``prefetch``, the body left as bytes, no reply."""
    call = delivered(broker, handler)
    call.__name__ = call.__qualname__ = f"on_{queue_key.replace('.', '_').replace('-', '_')}"
    exchange = topology.exchange(topology.spec(queue_key).exchange) if bind else None
    broker.subscriber(
        topology.queue(queue_key),
        exchange=exchange,
        ack_policy=AckPolicy.MANUAL,
        channel=Channel(prefetch_count=prefetch),
        no_reply=True,
        decoder=raw_body,
    )(call)


def settling(
    broker: RabbitBroker,
    topology: Topology,
    senders: Senders,
    queue_key: str,
    work: Callable[[RabbitMessage], Awaitable[object]],
) -> Handler:
    """A delivery's handler: ``work`` on it, the delivery settled by ``settle`` (what ``consume``
    subscribes, and what the batching consumers run a message alone with)."""

    async def handler(msg: RabbitMessage) -> None:
        await settle(
            msg,
            broker=broker,
            topology=topology,
            queue_key=queue_key,
            senders=senders,
            work=lambda: work(msg),
        )

    return handler


def accepting(topology: Topology, senders: Senders, queue_key: str) -> Callable[[Any], bool]:
    """Whether a delivery comes from a broker user ``queue_key`` accepts (``senders``): the check
    ``settle`` makes first, for a consumer that must make it before handing a message on."""
    spec = topology.spec(queue_key)

    def accepts(msg: RabbitMessage) -> bool:
        raw = msg.raw_message
        return senders.refusal(spec, raw.user_id, raw.headers) is None

    return accepts


class PermanentError(Exception):
    """This message can never succeed as it is: dead-letter it with ``code``."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code)
        self.code = code
        self.detail = detail


def delivery_count(msg: RabbitMessage) -> int:
    headers = msg.raw_message.headers or {}
    count = headers.get("x-delivery-count", 0)
    return int(count) if isinstance(count, (int, str)) else 0


async def dead_letter(
    broker: RabbitBroker,
    topology: Topology,
    queue_key: str,
    msg: RabbitMessage,
    code: str,
    detail: str,
    *,
    senders: Senders,
) -> None:
    raw = msg.raw_message
    headers = dict(raw.headers or {})
    headers.pop(SENDER_HEADER, None)
    if original := senders.sender(raw.user_id, raw.headers):
        headers[SENDER_HEADER] = original
    headers.update(
        {
            "x-signoff-reason": code,
            "x-signoff-detail": detail[:500],
            "x-signoff-queue": topology.name(queue_key),
            # the DLQ (a quorum queue) overwrites x-delivery-count with its own
            "x-signoff-deliveries": delivery_count(msg) + 1,
        }
    )
    await broker.publish(
        raw.body,
        exchange=topology.name("dlx"),
        routing_key=topology.name(queue_key),
        headers=headers,
        message_id=raw.message_id,
        correlation_id=raw.correlation_id,
        message_type=raw.type,
        content_type=raw.content_type,
        user_id=senders.me,
        persist=True,
        mandatory=True,
    )
    MESSAGES_DEAD_LETTERED.labels(queue=queue_key, reason=code).inc()
    log.warning(
        "message.dead_lettered",
        queue=queue_key,
        reason=code,
        detail=detail[:200],
        message_id=raw.message_id,
    )


async def settle(
    msg: RabbitMessage,
    *,
    broker: RabbitBroker,
    topology: Topology,
    queue_key: str,
    senders: Senders,
    work: Callable[[], Awaitable[T]],
    backoff_s: float = 0.5,
) -> T | None:
    started = time.perf_counter()
    last_delivery = delivery_count(msg) + 1 >= topology.delivery_limit
    raw = msg.raw_message
    refusal = senders.refusal(topology.spec(queue_key), raw.user_id, raw.headers)
    if refusal is not None:  # changes nothing: the handler never sees it
        await _reject(msg, broker, topology, queue_key, "unexpected_sender", refusal, senders)
        return None
    try:
        result = await carried_through(work, queue_key)
    except (PermanentError, ValidationError) as exc:
        code = exc.code if isinstance(exc, PermanentError) else "invalid_message"
        detail = exc.detail if isinstance(exc, PermanentError) else summary(exc, limit=5)
        await _reject(msg, broker, topology, queue_key, code, detail, senders)
        return None
    except Exception as exc:
        if is_transient(exc) and not last_delivery:
            log.warning("message.transient_error", queue=queue_key, error=type(exc).__name__)
            await asyncio.sleep(backoff_s * (delivery_count(msg) + 1))
            await msg.nack(requeue=True)
            MESSAGES_CONSUMED.labels(queue=queue_key, result="retried").inc()
            return None
        correlation_id = new_id("cor")
        log.error(
            "message.handler_failed", queue=queue_key, correlation_id=correlation_id, exc_info=exc
        )
        if last_delivery:
            await _reject(
                msg,
                broker,
                topology,
                queue_key,
                "handler_failed",
                f"correlation_id={correlation_id}",
                senders,
            )
        else:
            await msg.nack(requeue=True)
            MESSAGES_CONSUMED.labels(queue=queue_key, result="retried").inc()
        return None
    await msg.ack()
    succeeded, seconds = handled(queue_key)
    succeeded.inc()
    seconds.observe(time.perf_counter() - started)
    return result


async def carried_through(work: Callable[[], Awaitable[T]], queue_key: str) -> T:
    """``work()``, on a task of its own that the delivery's cancellation does not reach: a closed
    channel cancels the handler waiting here (which then settles nothing), not the work."""
    task: asyncio.Future[T] = asyncio.ensure_future(work())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            _carried.add(task)
            task.add_done_callback(lambda done: _carried_ended(done, queue_key))
            MESSAGES_CONSUMED.labels(queue=queue_key, result="carried_on").inc()
            log.info("message.work_carried_on", queue=queue_key)
        raise


def _carried_ended(task: asyncio.Future[Any], queue_key: str) -> None:
    _carried.discard(task)
    error = None if task.cancelled() else task.exception()
    if error is not None:  # unacknowledged either way: its redelivery is the retry
        log.warning("message.carried_work_failed", queue=queue_key, error=repr(error))


def carried() -> int:
    """How many cancelled deliveries' work is still running."""
    return len(_carried)


async def finish(timeout_s: float) -> None:
    """Let carried work end (a stopping service, before its pool closes); past ``timeout_s``
    cancel what is left — unacknowledged, it is redelivered elsewhere."""
    if not _carried:
        return
    _, late = await asyncio.wait(set(_carried), timeout=timeout_s)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)


async def _reject(
    msg: RabbitMessage,
    broker: RabbitBroker,
    topology: Topology,
    queue_key: str,
    code: str,
    detail: str,
    senders: Senders,
) -> None:
    try:
        await dead_letter(broker, topology, queue_key, msg, code, detail, senders=senders)
    except Exception as exc:  # the copy did not land: let the broker try again
        log.error("message.dead_letter_failed", queue=queue_key, error=repr(exc))
        await msg.nack(requeue=True)
        return
    await msg.ack()
    MESSAGES_CONSUMED.labels(queue=queue_key, result="dead_lettered").inc()
