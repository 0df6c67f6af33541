"""The ``ReconciliationRequired`` subscriber: record one check per attempt, ack after commit.

The inbox row (message id) and the check row (attempt id, unique) commit together, so a
redelivered or re-published request changes nothing. A request for an operation this reconciler
cannot run is dead-lettered (``unsupported_version``) rather than parked as a check no one can
answer.
"""

from __future__ import annotations

from typing import Any

from faststream import AckPolicy
from faststream.message import StreamMessage
from faststream.rabbit import Channel
from faststream.rabbit.annotations import RabbitMessage
from signoff_contracts.v1 import ReconciliationRequired
from signoff_runtime.consumer import PermanentError, settle
from signoff_runtime.inbox import first_delivery
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.service import Runtime
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_reconciler import metrics, repository
from signoff_reconciler.checks import Checker
from signoff_reconciler.tables import inbox

QUEUE = "reconciler.required"


async def record(engine: AsyncEngine, operations: Operations, body: bytes) -> bool:
    """Open a check for the request; ``False`` if it was seen before."""
    message = ReconciliationRequired.model_validate_json(body)
    try:
        operations.get(message.operation_kind, message.contract_version)
    except UnknownOperation:
        raise PermanentError(
            "unsupported_version", f"{message.operation_kind} v{message.contract_version}"
        ) from None
    async with engine.begin() as conn:
        fresh = await first_delivery(conn, inbox, message.message_id)
        if fresh:
            fresh = await repository.record(conn, message)
    metrics.REQUESTS.labels("recorded" if fresh else "duplicate").inc()
    return fresh


async def _raw(msg: StreamMessage[Any]) -> bytes:
    return msg.body


def register(runtime: Runtime, operations: Operations, checker: Checker, *, prefetch: int) -> None:
    broker, topology, engine = runtime.broker, runtime.topology, runtime.engine

    async def work(body: bytes) -> None:
        if await record(engine, operations, body):
            checker.wake()

    @broker.subscriber(
        topology.queue(QUEUE),
        channel=Channel(prefetch_count=prefetch),
        ack_policy=AckPolicy.MANUAL,
        decoder=_raw,
    )
    async def on_required(msg: RabbitMessage) -> None:
        await settle(
            msg, broker=broker, topology=topology, queue_key=QUEUE, work=lambda: work(msg.body)
        )
