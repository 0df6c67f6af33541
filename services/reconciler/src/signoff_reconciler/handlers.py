"""The ``ReconciliationRequired`` subscriber: record one check per attempt, ack after commit.

The inbox row (message id) and the check row (attempt id, unique) commit together, so a
redelivered or re-published request changes nothing. A request for an operation this reconciler
cannot run is dead-lettered (``unsupported_version``) rather than parked as a check no one can
answer.
"""

from __future__ import annotations

from signoff_contracts.outcomes import outcome_adapter
from signoff_contracts.v1 import ReconciliationRequired
from signoff_runtime.consumer import PermanentError, consume
from signoff_runtime.inbox import first_delivery
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.service import Runtime
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_reconciler import metrics, reports, repository
from signoff_reconciler.checks import Checker
from signoff_reconciler.tables import inbox

QUEUE = "reconciler.required"


async def record(
    engine: AsyncEngine, operations: Operations, body: bytes, topology: Topology | None = None
) -> bool:
    """Open a check for the request; ``False`` if it was seen before.

    A check the stranded scan opened first learns its contract here; if it concluded already,
    its withheld outcome is reported now (``topology`` names the exchange)."""
    message = ReconciliationRequired.model_validate_json(body)
    try:
        operations.get(message.operation_kind, message.contract_version)
    except UnknownOperation:
        raise PermanentError(
            "unsupported_version", f"{message.operation_kind} v{message.contract_version}"
        ) from None
    async with unit_of_work(engine) as uow:
        fresh = await first_delivery(uow.conn, inbox, message.message_id)
        if fresh:
            fresh = await repository.record(uow.conn, message)
            if not fresh and topology is not None:
                await _report_withheld(uow.conn, topology, message)
    metrics.REQUESTS.labels("recorded" if fresh else "duplicate").inc()
    return fresh


async def _report_withheld(
    conn: AsyncConnection, topology: Topology, message: ReconciliationRequired
) -> None:
    filled = await repository.fill_contract(conn, message)
    if filled is None or filled.outcome is None or filled.status == "open":
        return
    check = repository.Check(
        **{name: getattr(filled, name) for name in repository.Check.__dataclass_fields__}
    )
    outcome = outcome_adapter.validate_python(filled.outcome)
    message_id = await reports.outcome(conn, topology, check, outcome)
    assert message_id is not None
    await repository.set_outcome_message(conn, check.id, message_id)


def register(runtime: Runtime, operations: Operations, checker: Checker, *, prefetch: int) -> None:
    async def work(body: bytes) -> None:
        if await record(runtime.engine, operations, body, runtime.topology):
            checker.wake()

    consume(
        runtime.broker,
        runtime.topology,
        runtime.senders,
        QUEUE,
        lambda msg: work(msg.body),
        prefetch=prefetch,
    )
