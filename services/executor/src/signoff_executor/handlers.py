"""The contract subscriber: bounded prefetch, manual acks after commit, settled by ``settle``.

``settle`` acks only once ``Executor.handle`` returned (its transactions committed), dead-letters
what can never run (``invalid_message``, ``bad_signature``, ``unsupported_version``) with the
reason in ``x-signoff-reason``, and requeues transient failures within the quorum queue's delivery
limit. Nothing is published from here: outcomes leave through the outbox.
"""

from __future__ import annotations

from signoff_runtime.consumer import consume
from signoff_runtime.service import Runtime

from signoff_executor.execution import Executor

QUEUE = "executor.contracts"


def register(runtime: Runtime, executor: Executor, *, prefetch: int) -> None:
    """``Executor.handle`` parses the body itself, so garbage is dead-lettered with a reason."""
    consume(
        runtime.broker,
        runtime.topology,
        runtime.senders,
        QUEUE,
        lambda msg: executor.handle(msg.body),
        prefetch=prefetch,
    )
