"""Every queue's dead letters, archived for operators and replayed on request — once.

The reconciler (the operator-facing service) consumes each ``<queue>.dlq`` and archives every
letter into ``reconciler.dead_letters`` with its reason, then acks it: a dead letter is never
dropped (a failed archive is requeued after a pause — a DLQ has no delivery limit) and never
blocks the work queue it came from. The reason is the consumer's own (``x-signoff-reason`` /
``x-signoff-detail``, set by ``settle``) or RabbitMQ's (``x-first-death-reason``, e.g.
``delivery_limit`` for a message whose consumer died on every delivery). At-least-once
dead-lettering may bring a letter twice: it is archived once (a partial unique index on
queue + message id among letters not yet replayed).

``replay`` re-publishes the original body and properties to the original queue *only* (through
the ``replay`` exchange, where each work queue is bound by its own name, so a topic binding does
not fan it out again and nobody needs ``amq.default``), persistent and confirmed, and marks the
row replayed — who, when, why — in the same transaction; a replayed letter is refused a second
time. The consumer's own dedup (inbox) makes a replay of a message it did process harmless.

Senders (``signoff_runtime.senders``): the archive records each letter's original sender in
``x-signoff-sender`` (believed from the queue's own consumer, else the letter's ``user_id``) and
the broker user that wrote the letter in ``x-signoff-dead-lettered-by``. A replay is published
with the replayer's own ``user_id`` (an operator's ``cli`` user in production) and that original
sender, so the consumer accepts it exactly when it would have accepted the original. Bearer
tokens are redacted before a letter is stored (``redaction``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import aio_pika
import structlog
from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitQueue
from signoff_runtime.consumer import Delivery, raw_body
from signoff_runtime.senders import SENDER_HEADER, Senders, broker_user
from signoff_runtime.service import Runtime
from signoff_runtime.topology import QUEUES, Topology
from signoff_runtime.transient import is_transient
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_reconciler import metrics
from signoff_reconciler.redaction import redact, redact_body

log = structlog.get_logger(__name__)
QUEUE_KEYS = tuple(spec.key for spec in QUEUES)
_COLUMNS = (
    "id, queue, reason, detail, deliveries, message_id, message_type, correlation_id, "
    "content_type, body, headers, dead_at, replayed_at, replayed_by, replay_note"
)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    queue: str
    reason: str
    detail: str | None
    deliveries: int | None
    message_id: str | None
    message_type: str | None
    correlation_id: str | None
    content_type: str | None
    body: bytes
    headers: dict[str, Any]
    dead_at: datetime
    replayed_at: datetime | None
    replayed_by: str | None
    replay_note: str | None


class ReplayRefused(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


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


DEAD_LETTERED_BY = "x-signoff-dead-lettered-by"


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
    async with unit_of_work(engine) as uow:
        row = await uow.conn.execute(
            text(
                "INSERT INTO reconciler.dead_letters (queue, reason, detail, deliveries, "
                "message_id, message_type, correlation_id, content_type, body, headers) "
                "VALUES (:q, :reason, :detail, :deliveries, :mid, :mt, :cid, :ct, :body, "
                "CAST(:headers AS jsonb)) ON CONFLICT (queue, message_id) "
                "WHERE replayed_at IS NULL DO NOTHING RETURNING id"
            ),
            {
                "q": queue_key,
                "reason": reason,
                "detail": None if detail is None else str(detail)[:1000],
                "deliveries": deliveries,
                "mid": raw.message_id,
                "mt": raw.type,
                "cid": raw.correlation_id,
                "ct": raw.content_type,
                "body": redact_body(bytes(raw.body)),
                "headers": json.dumps(headers),
            },
        )
        fresh = row.first() is not None
    if fresh:
        metrics.DEAD_LETTERS.labels(queue_key, reason).inc()
        log.warning(
            "dead_letter.archived", queue=queue_key, reason=reason, message_id=raw.message_id
        )
    return fresh


def register(runtime: Runtime, *, prefetch: int) -> None:
    """One consumer per ``<queue>.dlq`` (declared by the topology; not redeclared here)."""
    for key in QUEUE_KEYS:
        _subscribe(runtime, key, prefetch)


def _subscribe(runtime: Runtime, key: str, prefetch: int) -> None:
    engine, topology, senders = runtime.engine, runtime.topology, runtime.senders

    @runtime.broker.subscriber(
        RabbitQueue(topology.dlq(key), declare=False),
        channel=Channel(prefetch_count=prefetch),
        ack_policy=AckPolicy.MANUAL,
        decoder=raw_body,
    )
    async def on_dead_letter(msg: Delivery) -> None:
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


async def listing(
    engine: AsyncEngine, *, queue: str | None = None, replayed: bool = False, limit: int = 50
) -> list[DeadLetter]:
    """Archived letters, oldest first; only those not replayed unless ``replayed``."""
    where = ["true"]
    if queue is not None:
        where.append("queue = :queue")
    if not replayed:
        where.append("replayed_at IS NULL")
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM reconciler.dead_letters "  # noqa: S608 - constants
                f"WHERE {' AND '.join(where)} ORDER BY id LIMIT :n"
            ),
            {"queue": queue, "n": limit} if queue is not None else {"n": limit},
        )
        return [_letter(row) for row in rows]


async def one(engine: AsyncEngine, letter_id: int) -> DeadLetter | None:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(f"SELECT {_COLUMNS} FROM reconciler.dead_letters WHERE id = :id"),  # noqa: S608
                {"id": letter_id},
            )
        ).first()
    return None if row is None else _letter(row)


async def replay(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    letter_id: int,
    *,
    operator: str,
    note: str | None = None,
    timeout_s: float = 10.0,
) -> DeadLetter:
    """Publish the letter back to its queue and record who did it; refuse a second replay."""
    async with unit_of_work(engine) as uow:
        row = (
            await uow.conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM reconciler.dead_letters "  # noqa: S608 - constants
                    "WHERE id = :id FOR UPDATE"
                ),
                {"id": letter_id},
            )
        ).first()
        if row is None:
            raise ReplayRefused("not_found", f"no dead letter {letter_id}")
        letter = _letter(row)
        if letter.replayed_at is not None:
            raise ReplayRefused(
                "already_replayed",
                f"replayed by {letter.replayed_by} at {letter.replayed_at.isoformat()}",
            )
        if letter.queue not in QUEUE_KEYS:
            raise ReplayRefused("unknown_queue", letter.queue)
        await _publish(amqp_url, topology, letter, timeout_s)
        row = (
            await uow.conn.execute(
                text(
                    "UPDATE reconciler.dead_letters SET replayed_at = now(), "  # noqa: S608
                    f"replayed_by = :who, replay_note = :note WHERE id = :id RETURNING {_COLUMNS}"
                ),
                {"id": letter_id, "who": operator, "note": note},
            )
        ).one()
    log.warning(
        "dead_letter.replayed", id=letter_id, queue=letter.queue, operator=operator, note=note
    )
    return _letter(row)


async def _publish(amqp_url: str, topology: Topology, letter: DeadLetter, timeout_s: float) -> None:
    headers = {k: v for k, v in letter.headers.items() if not k.startswith("x-")}
    headers["x-signoff-replay-of"] = letter.id
    if isinstance(original := letter.headers.get(SENDER_HEADER), str):
        headers[SENDER_HEADER] = original
    connection = await aio_pika.connect(amqp_url, timeout=timeout_s)
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        replay = await channel.get_exchange(topology.name("replay"), ensure=False)
        await replay.publish(
            aio_pika.Message(
                letter.body,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                message_id=letter.message_id,
                correlation_id=letter.correlation_id,
                type=letter.message_type,
                content_type=letter.content_type,
                user_id=broker_user(amqp_url),
                headers=headers,
            ),
            routing_key=topology.name(letter.queue),
            mandatory=True,
            timeout=timeout_s,
        )


def _letter(row: Any) -> DeadLetter:
    values = dict(row._mapping)
    values["body"] = bytes(values["body"])
    return DeadLetter(**values)
