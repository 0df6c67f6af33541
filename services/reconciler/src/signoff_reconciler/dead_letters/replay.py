"""Replaying a dead letter: back to its own queue only, once, recorded in the same transaction.

The row is marked replayed *before* the letter is published, while it is still locked: the
consumer may refuse the replay again, and the archive see that new letter, before the replay's
transaction commits. The archive's insert skips a letter whose queue and message id match a row
not yet replayed (an at-least-once duplicate); with the mark already written it waits for this
transaction instead and then archives the new letter. Marked after the publish, that window
(publish → mark) took the refused replay for a duplicate of the letter being replayed and acked
it away — lost. A failed publish still rolls the mark back.
"""

from __future__ import annotations

import aio_pika
import structlog
from signoff_runtime import failover
from signoff_runtime.senders import SENDER_HEADER, broker_user
from signoff_runtime.topology import QUEUES, Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_reconciler.dead_letters import repository
from signoff_reconciler.dead_letters.repository import DeadLetter

log = structlog.get_logger(__name__)
QUEUE_KEYS = tuple(spec.key for spec in QUEUES)


class ReplayRefused(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


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
        letter = await repository.lock(uow.conn, letter_id)
        if letter is None:
            raise ReplayRefused("not_found", f"no dead letter {letter_id}")
        if letter.replayed_at is not None:
            raise ReplayRefused(
                "already_replayed",
                f"replayed by {letter.replayed_by} at {letter.replayed_at.isoformat()}",
            )
        if letter.queue not in QUEUE_KEYS:
            raise ReplayRefused("unknown_queue", letter.queue)
        # marked first: see the module's docstring (a replay refused again before the commit)
        replayed = await repository.mark_replayed(uow.conn, letter_id, operator, note)
        await _publish(amqp_url, topology, letter, timeout_s)
    log.warning(
        "dead_letter.replayed", id=letter_id, queue=letter.queue, operator=operator, note=note
    )
    return replayed


async def _publish(amqp_url: str, topology: Topology, letter: DeadLetter, timeout_s: float) -> None:
    headers = {k: v for k, v in letter.headers.items() if not k.startswith("x-")}
    headers["x-signoff-replay-of"] = letter.id
    if isinstance(original := letter.headers.get(SENDER_HEADER), str):
        headers[SENDER_HEADER] = original
    connection = await failover.connect(amqp_url, timeout=timeout_s)
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
