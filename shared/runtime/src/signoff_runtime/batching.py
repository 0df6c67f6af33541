"""Group commit for a hot consumer: the deliveries at hand, handled in one transaction.

A subscriber is handed each delivery as a task of its own (aiormq starts one per delivery, up to
the channel's prefetch), and a consumer that opens a transaction per message pays a BEGIN, a
COMMIT — a WAL flush — and its statements for every message, even when thirty arrive together.
``consume_batched`` subscribes a queue's work through a ``Batcher`` instead, which hands the work
the deliveries that are waiting, at most ``size`` at a time, in ONE ``unit_of_work``
(``consume_runs`` hands them to a work that commits by itself, such as statements each atomic in
autocommit):

- no timer: a delivery that finds no batch in flight starts one at once, taking along whatever
  deliveries the event loop has already handed over (one pass of the loop); those that arrive
  while a batch runs wait for it and form the next one. At low load each batch is one message,
  handled as soon as it arrives; under load batches grow by themselves, as PostgreSQL's own group
  commit does with WAL flushes. One batch is in flight per subscriber and process, and no more
  than the channel's prefetch can be waiting: a size above the prefetch changes nothing.
- ack after commit: each message of a batch is acknowledged only once the transaction that
  recorded it has committed.
- a batch that fails is split: each of its messages is handled alone, in a transaction of its
  own, through ``consumer.settle`` — so a poison message is dead-lettered with its reason, a
  transient failure is requeued (with ``settle``'s back-off and the queue's delivery limit), and
  the neighbours are recorded. Each is settled by its own delivery's handler, concurrently, while
  the next batch goes on (a back-off holds up nothing else). A batch of one that fails is so
  tried once more. Redoing them is safe: the batch rolled back, or, if its commit was in doubt,
  each message's inbox row (written in the same transaction) says it was recorded.
- the sender check comes first, message by message: a refused one goes to ``settle``, which
  dead-letters it without handing it to the work.
- a batch's ``run`` may also say, message by message (``Settled``), what is to be done once the
  commit answered and before the ack (publish a reply), or that a message is to be settled alone
  after all (its own part of the batch was undone: ``signoff_runtime.savepoints``). A message
  whose after-commit action fails is settled alone too, not acked: its redelivery is answered
  from what the commit stored.

This sits at the FastStream handler, not under it at aio-pika's level: each delivery's handler
still runs until its own message is settled, so FastStream's graceful stop (which waits for the
handlers in flight) still waits for every message, and nothing else of the subscriber changes.
The handlers that wait hand the next batch to the oldest of them, so no task outlives them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog
from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime import consumer
from signoff_runtime.metrics import (
    BATCH_SIZE,
    BATCH_WAITING,
    BATCHES_SPLIT,
    handled,
)
from signoff_runtime.senders import Senders
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work

log = structlog.get_logger(__name__)

#: the work of a batching consumer: record ``messages`` (parsed by the work) on ``tx``; whatever
#: must wait for the commit is registered with ``tx.after_commit``
BatchWork = Callable[[UnitOfWork, Sequence[RabbitMessage]], Awaitable[object]]

#: what a batch's ``run`` says of one of its messages once the commit answered: ``None``, ack
#: it; an action, await it, then ack it; ``ALONE``, settle it by itself (through ``settle``)
Settled = Callable[[], Awaitable[object]] | Literal["alone"] | None
ALONE: Literal["alone"] = "alone"

#: what a waiting delivery is told: lead the next batch, its batch settled it (or gave it up,
#: unacknowledged, when cancelled), or settle it alone on its own task
Fate = Literal["lead", "done", "alone"]


@dataclass(eq=False)
class _Waiting:
    msg: RabbitMessage
    turn: asyncio.Future[Fate] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    arrived: float = field(default_factory=time.perf_counter)
    #: what its batch did with it (``None`` until the batch is over)
    outcome: Fate | None = None

    def release(self, fate: Fate) -> None:
        if fate != "lead" and self.outcome is None:
            self.outcome = fate
        if not self.turn.done():
            self.turn.set_result(fate)


class Batcher:
    """Gathers one subscriber's deliveries and settles them a batch at a time (module docstring).

    ``run`` handles a batch in one transaction; ``alone`` settles one message by itself (each
    message of a failed batch, and one from a refused sender); ``accepts`` is the sender check.
    """

    def __init__(
        self,
        queue_key: str,
        *,
        size: int,
        run: Callable[[Sequence[RabbitMessage]], Awaitable[Sequence[Settled] | None]],
        alone: Callable[[RabbitMessage], Awaitable[object]],
        accepts: Callable[[RabbitMessage], bool] = lambda _: True,
    ) -> None:
        assert size >= 1
        self.queue_key = queue_key
        self.size = size
        self._run = run
        self._alone = alone
        self._accepts = accepts
        self._waiting: deque[_Waiting] = deque()
        self._busy = False
        self._gauge = BATCH_WAITING.labels(queue=queue_key)

    @property
    def waiting(self) -> int:
        """Deliveries waiting for the batch in flight."""
        return len(self._waiting)

    async def submit(self, msg: RabbitMessage) -> None:
        """Settle ``msg`` in a batch; returns once it is settled (or its batch was given up)."""
        me = _Waiting(msg)
        self._waiting.append(me)
        fresh = not self._busy
        if fresh:
            self._busy = True
            fate: Fate = "lead"
        else:
            self._gauge.set(len(self._waiting))
            try:
                fate = await me.turn
            except asyncio.CancelledError:  # its channel closed: unacked, so redelivered
                self._abandon(me)
                raise
        if fate == "lead":
            try:
                if fresh:  # nothing was in flight: let the deliveries the loop holds join
                    await asyncio.sleep(0)
                taken = min(self.size, len(self._waiting))
                batch = [self._waiting.popleft() for _ in range(taken)]
                self._gauge.set(len(self._waiting))
                await self._flush(batch)
            finally:  # the oldest waiting delivery leads the next batch
                if self._waiting:
                    self._waiting[0].release("lead")
                else:
                    self._busy = False
            fate = me.outcome or "done"
        if fate == "alone":  # its own transaction, its own task: the next batch goes on
            await self._alone(msg)

    def _abandon(self, me: _Waiting) -> None:
        """``me``'s task was cancelled while it waited: forget it, and pass on the lead if it had
        just been handed the next batch."""
        if me in self._waiting:
            self._waiting.remove(me)
            self._gauge.set(len(self._waiting))
        handed = me.turn.done() and not me.turn.cancelled() and me.turn.result() == "lead"
        if handed:
            if self._waiting:
                self._waiting[0].release("lead")
            else:
                self._busy = False

    async def _flush(self, batch: list[_Waiting]) -> None:
        """Commit ``batch``'s accepted messages in one transaction, then ack them; a refused
        sender's message, or every message of a batch that failed, is released to be settled
        alone."""
        try:
            accepted: list[_Waiting] = []
            for waiting in batch:
                if self._accepts(waiting.msg):
                    accepted.append(waiting)
                else:  # ``settle`` dead-letters it without running the work
                    waiting.release("alone")
            if accepted:
                await self._commit(accepted)
        finally:
            for waiting in batch:  # cancelled mid-batch: unacknowledged, so redelivered
                waiting.release("done")

    async def _commit(self, batch: list[_Waiting]) -> None:
        BATCH_SIZE.labels(queue=self.queue_key).observe(len(batch))
        try:
            settled = await self._run([waiting.msg for waiting in batch])
        except Exception as exc:
            if len(batch) > 1:
                BATCHES_SPLIT.labels(queue=self.queue_key).inc()
            log.warning(
                "batch.failed", queue=self.queue_key, size=len(batch), error=type(exc).__name__
            )
            for waiting in batch:
                waiting.release("alone")
            return
        done = time.perf_counter()
        fates = [None] * len(batch) if settled is None else list(settled)
        # the after-commit actions (replies) go out together, each message acked after its own
        await asyncio.gather(
            *(self._ack(w, fate, done) for w, fate in zip(batch, fates, strict=True))
        )

    async def _ack(self, waiting: _Waiting, fate: Settled, done: float) -> None:
        if fate == ALONE:
            waiting.release("alone")
            return
        if fate is not None:
            try:
                await fate()
            except Exception as exc:  # settled alone: its redelivery is answered from the commit
                log.warning("batch.after_commit_failed", queue=self.queue_key, error=repr(exc))
                waiting.release("alone")
                return
        try:
            await waiting.msg.ack()
        except Exception as exc:  # the channel is gone: redelivered, the inbox drops it
            log.warning("batch.ack_failed", queue=self.queue_key, error=repr(exc))
            return
        succeeded, seconds = handled(self.queue_key)
        succeeded.inc()
        seconds.observe(done - waiting.arrived)


#: a batch's whole handling, its own transactions included: ``run`` records ``messages`` however
#: it commits, and must be safe to redo (a batch that fails is run again, message by message)
BatchRun = Callable[[Sequence[RabbitMessage]], Awaitable[None]]


def consume_runs(
    broker: RabbitBroker,
    topology: Topology,
    senders: Senders,
    queue_key: str,
    run: BatchRun,
    *,
    prefetch: int,
    size: int,
    bind: bool = False,
) -> Batcher | None:
    """The queue's deliveries handed to ``run`` a batch at a time (at most ``size``; the module
    docstring), each acked once ``run`` returned, each of a batch that failed settled alone
    through ``settle``. ``size`` 1 subscribes it unbatched — each message alone, concurrently up
    to ``prefetch``, as ``consumer.consume`` does — and returns no ``Batcher``."""

    def one(msg: RabbitMessage) -> Awaitable[None]:
        return run([msg])

    if size <= 1:
        consumer.consume(broker, topology, senders, queue_key, one, prefetch=prefetch, bind=bind)
        return None
    alone = consumer.settling(broker, topology, senders, queue_key, one)
    accepts = consumer.accepting(topology, senders, queue_key)
    batcher = Batcher(queue_key, size=size, run=run, alone=alone, accepts=accepts)

    async def handler(msg: RabbitMessage) -> None:
        await batcher.submit(msg)

    consumer.subscribe(broker, topology, queue_key, handler, prefetch=prefetch, bind=bind)
    return batcher


def consume_batched(
    broker: RabbitBroker,
    topology: Topology,
    senders: Senders,
    queue_key: str,
    work: BatchWork,
    *,
    engine: AsyncEngine,
    prefetch: int,
    size: int,
    bind: bool = False,
) -> Batcher | None:
    """``consume_runs`` for a ``work`` that records many messages in one ``unit_of_work`` of
    ``engine``: a batch in one transaction, a message alone in one of its own."""

    async def run(messages: Sequence[RabbitMessage]) -> None:
        async with unit_of_work(engine) as tx:
            await work(tx, messages)

    return consume_runs(
        broker, topology, senders, queue_key, run, prefetch=prefetch, size=size, bind=bind
    )
