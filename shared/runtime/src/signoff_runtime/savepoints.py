"""Group commit for a consumer whose messages each may fail on their own: one SAVEPOINT each.

``signoff_runtime.batching`` records the deliveries at hand in one transaction, and a batch that
fails is settled message by message. That suits a work that records a batch as a whole (three
statements for thirty outcomes). A request-reply command is decided one at a time instead, and
each decision may end in ways that must undo its own work and nobody else's; ``consume_each``
batches such a work (``each``, one message on the batch's transaction):

- each message runs in its own SAVEPOINT (``UnitOfWork.savepoint``) of the batch's transaction,
  in the order delivered, so a later one sees what an earlier one wrote (two approvals of one
  proposal count in turn, a duplicate finds its first copy's inbox row);
- ``each`` returns what is to be done once the batch has committed (publish the reply), which the
  ``Batcher`` runs before that message's ack; raising ``Undo`` rolls back its savepoint and still
  runs its action (a reply that must leave nothing behind, such as a command refused for a
  quota);
- any other exception rolls back its savepoint, and the message is settled alone once the batch
  has committed (its retries, dead letter and typed rejection are those of the queue's consumer
  without batches, ``alone``); its neighbours are committed in the batch;
- should the batch itself fail (its commit, or a savepoint that cannot be rolled back), each
  message is settled alone, as ``batching`` does; ``alone`` must therefore give the same answer as
  the batch would (it is the consumer the queue had before, an inbox in the same transaction
  making the redo safe).

Two round trips per message (SAVEPOINT, RELEASE) buy one COMMIT — a WAL flush — per batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime import consumer
from signoff_runtime.batching import ALONE, Batcher, Settled
from signoff_runtime.senders import Senders
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import TransactionLost, UnitOfWork, unit_of_work

log = structlog.get_logger(__name__)

#: what is done with a message once its batch has committed, before its ack
Then = Callable[[], Awaitable[object]]
#: one message's work on the batch's transaction (inside its savepoint): its ``Then``, if any
EachWork = Callable[[UnitOfWork, RabbitMessage], Awaitable[Then | None]]


class Undo(Exception):
    """Raised by ``each``: roll back this message's savepoint, yet settle it — ``then`` runs once
    the batch has committed, then the message is acked."""

    def __init__(self, then: Then | None = None) -> None:
        super().__init__("undo")
        self.then = then


async def run_each(
    engine: AsyncEngine, each: EachWork, messages: Sequence[RabbitMessage]
) -> list[Settled]:
    """``messages`` in one transaction, each in its own savepoint; what the ``Batcher`` is to do
    with each once the commit answered."""
    settled: list[Settled] = []
    async with unit_of_work(engine) as tx:
        for msg in messages:
            settled.append(await _one(tx, each, msg))
    return settled


async def _one(tx: UnitOfWork, each: EachWork, msg: RabbitMessage) -> Settled:
    try:
        async with tx.savepoint():
            return await each(tx, msg)
    except Undo as undo:
        return undo.then
    except TransactionLost:  # the connection is gone: so is the batch
        raise
    except Exception as exc:
        log.warning("batch.message_failed", error=type(exc).__name__)
        return ALONE


def consume_each(
    broker: RabbitBroker,
    topology: Topology,
    senders: Senders,
    queue_key: str,
    each: EachWork,
    *,
    alone: Callable[[RabbitMessage], Awaitable[object]],
    engine: AsyncEngine,
    prefetch: int,
    size: int,
    bind: bool = False,
) -> Batcher | None:
    """Subscribe ``queue_key``: its deliveries batched (at most ``size``), each message in its
    own savepoint through ``each`` (the module docstring); a message settled by itself goes
    through ``settle`` with ``alone``. ``size`` 1 subscribes ``alone`` unbatched, as
    ``consumer.consume`` does, and returns no ``Batcher``."""
    if size <= 1:
        consumer.consume(broker, topology, senders, queue_key, alone, prefetch=prefetch, bind=bind)
        return None

    async def run(messages: Sequence[RabbitMessage]) -> list[Settled]:
        return await run_each(engine, each, messages)

    by_itself = consumer.settling(broker, topology, senders, queue_key, alone)
    accepts = consumer.accepting(topology, senders, queue_key)
    batch = Batcher(queue_key, size=size, run=run, alone=by_itself, accepts=accepts)

    async def handler(msg: RabbitMessage) -> None:
        await batch.submit(msg)

    consumer.subscribe(broker, topology, queue_key, handler, prefetch=prefetch, bind=bind)
    return batch
