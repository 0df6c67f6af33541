"""The contract subscriber: bounded prefetch, manual acks after commit, settled by ``settle``.

``settle`` acks only once ``Executor.handle`` returned (its transactions committed), dead-letters
what can never run (``invalid_message``, ``bad_signature``, ``unsupported_version``) with the
reason in ``x-signoff-reason``, and requeues transient failures within the quorum queue's delivery
limit. Nothing is published from here: outcomes leave through the outbox.
"""

from __future__ import annotations

from typing import Any

from faststream import AckPolicy
from faststream.message import StreamMessage
from faststream.rabbit import Channel
from signoff_runtime.consumer import Delivery, settle
from signoff_runtime.service import Runtime

from signoff_executor.execution import Executor

QUEUE = "executor.contracts"


async def _raw(msg: StreamMessage[Any]) -> bytes:
    """Leave the body alone: ``Executor.handle`` parses it, so garbage is dead-lettered with a
    reason instead of failing in FastStream's JSON decoder before ``settle`` ever runs."""
    return msg.body


def register(runtime: Runtime, executor: Executor, *, prefetch: int) -> None:
    broker, topology, senders = runtime.broker, runtime.topology, runtime.senders

    @broker.subscriber(
        topology.queue(QUEUE),
        channel=Channel(prefetch_count=prefetch),
        ack_policy=AckPolicy.MANUAL,
        decoder=_raw,
    )
    async def on_contract(msg: Delivery) -> None:
        await settle(
            msg,
            broker=broker,
            topology=topology,
            queue_key=QUEUE,
            senders=senders,
            work=lambda: executor.handle(msg.body),
        )
