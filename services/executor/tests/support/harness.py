"""Running the executor in-process and reading what it stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from signoff_conformance.toy.directory import ToyDirectory
from signoff_contracts.outcomes import OperationOutcome, outcome_adapter
from signoff_contracts.v1 import OutcomeReported, ReconciliationRequired
from signoff_executor.app import create_app
from signoff_executor.settings import ExecutorGroup, ExecutorSettings
from signoff_runtime.registry import Operations
from signoff_runtime.settings import AmqpSettings, DatabaseSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette

from support.contracts import VERIFYING


def settings(
    database_url: str, amqp_url: str, topology: Topology, **executor: Any
) -> ExecutorSettings:
    return ExecutorSettings(
        env="test",
        log_level="WARNING",
        db=DatabaseSettings(url=database_url, pool_size=8),
        amqp=AmqpSettings(
            url=amqp_url, prefix=topology.prefix, delivery_limit=topology.delivery_limit
        ),
        contracts=VERIFYING,
        executor=ExecutorGroup(**{"concurrency": 4, "graceful_timeout_s": 10.0, **executor}),
    )


@asynccontextmanager
async def running(settings: ExecutorSettings, operations: Operations) -> AsyncIterator[Starlette]:
    app = create_app(settings, operations, ToyDirectory())
    async with app.router.lifespan_context(app):
        yield app


async def execution(engine: AsyncEngine, contract_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM executor.executions WHERE contract_id = :c"), {"c": contract_id}
            )
        ).first()


async def outcome(engine: AsyncEngine, contract_id: str, within: float = 15.0) -> OperationOutcome:
    """Wait for the contract's stored outcome (its executions row is ``done``)."""

    async def probe() -> Any:
        row = await execution(engine, contract_id)
        return row if row is not None and row.status == "done" else None

    row = await wait_until(probe, timeout=within, what=f"outcome of {contract_id}")
    return outcome_adapter.validate_python(row.outcome)


async def outbox(engine: AsyncEngine, proposal_id: str) -> list[Any]:
    """Every message the executor's outbox holds about ``proposal_id``, parsed."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT message_type, routing_key, body, sent_at FROM executor.outbox "
                    "WHERE correlation_id = :p ORDER BY id"
                ),
                {"p": proposal_id},
            )
        ).all()
    parsed: list[Any] = []
    for row in rows:
        model = (
            OutcomeReported if row.message_type == "execution.outcome" else ReconciliationRequired
        )
        parsed.append(model.model_validate_json(bytes(row.body)))
    return parsed
