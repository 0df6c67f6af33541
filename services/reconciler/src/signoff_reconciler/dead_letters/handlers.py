"""The ``<queue>.dlq`` consumers: archive each letter with its reason, then ack it.

A failed archive is requeued after a pause (a DLQ has no delivery limit): a dead letter is never
dropped, and a transient failure is retried sooner than another.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from decimal import Decimal
from typing import Any

import structlog
from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitQueue
from faststream.rabbit.message import RabbitMessage
from signoff_runtime.consumer import delivered, raw_body
from signoff_runtime.senders import SENDER_HEADER, Senders
from signoff_runtime.service import Runtime
from signoff_runtime.topology import QUEUES, Topology
from signoff_runtime.transient import is_transient
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_reconciler import metrics
from signoff_reconciler.dead_letters import repository
from signoff_reconciler.redaction import redact, redact_body

log = structlog.get_logger(__name__)
QUEUE_KEYS = tuple(spec.key for spec in QUEUES)
DEAD_LETTERED_BY = "x-signoff-dead-lettered-by"


def jsonable(value: Any) -> Any:
    """AMQP header values (bytes, timestamps, decimals, nested tables) as JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def reason_of(headers: dict[str, Any], delivery_limit: int) -> tuple[str, str | None, int | None]:
    """Reason, detail and deliveries of a letter, from whichever side dead-lettered it."""
    reason = headers.get("x-signoff-reason")
    if reason:
        deliveries = headers.get("x-signoff-deliveries")
        return str(reason), headers.get("x-signoff-detail"), _int(deliveries)
    broker_reason = str(headers.get("x-first-death-reason") or "unknown")
    deliveries = delivery_limit + 1 if broker_reason == "delivery_limit" else None
    return broker_reason, f"dead-lettered by RabbitMQ ({broker_reason})", deliveries


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


async def archive(
    engine: AsyncEngine, topology: Topology, queue_key: str, raw: Any, senders: Senders
) -> bool:
    """Archive one letter; ``False`` if this letter (same queue and id) is archived already."""
    headers = redact(jsonable(dict(raw.headers or {})))
    original = senders.original_sender(topology.spec(queue_key), raw.user_id, raw.headers)
    headers.pop(SENDER_HEADER, None)
    if original:
        headers[SENDER_HEADER] = original
    headers[DEAD_LETTERED_BY] = raw.user_id
    reason, detail, deliveries = reason_of(headers, topology.delivery_limit)
    letter = repository.NewLetter(
        queue=queue_key,
        reason=reason,
        detail=detail,
        deliveries=deliveries,
        message_id=raw.message_id,
        message_type=raw.type,
        correlation_id=raw.correlation_id,
        content_type=raw.content_type,
        body=redact_body(bytes(raw.body)),
        headers=headers,
    )
    async with unit_of_work(engine) as uow:
        fresh = await repository.insert(uow.conn, letter)
    if fresh:
        metrics.DEAD_LETTERS.labels(queue_key, reason).inc()
        log.warning(
            "dead_letter.archived", queue=queue_key, reason=reason, message_id=raw.message_id
        )
    else:  # said, so a letter acked without a row of its own can be told from one never seen
        log.info(
            "dead_letter.already_archived",
            queue=queue_key,
            reason=reason,
            message_id=raw.message_id,
        )
    return fresh


def register(runtime: Runtime, *, prefetch: int) -> None:
    """One consumer per ``<queue>.dlq`` (declared by the topology; not redeclared here)."""
    for key in QUEUE_KEYS:
        _subscribe(runtime, key, prefetch)


def _subscribe(runtime: Runtime, key: str, prefetch: int) -> None:
    engine, topology, senders = runtime.engine, runtime.topology, runtime.senders

    async def on_dead_letter(msg: RabbitMessage) -> None:
        try:
            await archive(engine, topology, key, msg.raw_message, senders)
        except Exception as exc:  # never drop a dead letter: keep it for the next try
            transient = is_transient(exc)
            if transient:
                log.warning("dead_letter.archive_failed", queue=key, error=repr(exc))
            else:
                log.error("dead_letter.archive_failed", queue=key, exc_info=exc)
            await asyncio.sleep(1.0 if transient else 5.0)
            await msg.nack(requeue=True)
            return
        await msg.ack()

    runtime.broker.subscriber(
        RabbitQueue(topology.dlq(key), declare=False),
        channel=Channel(prefetch_count=prefetch),
        ack_policy=AckPolicy.MANUAL,
        decoder=raw_body,
    )(delivered(runtime.broker, on_dead_letter))
