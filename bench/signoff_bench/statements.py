"""Hot statements: the CPU a contract's and a claim's statements cost this process (issue 18).

``PYTHONPATH=bench .venv/bin/python -m signoff_bench.statements`` makes a fresh database and
runs, in one process, each workload ``BENCH_N`` times (default 400) through two paths side by
side — the SQLAlchemy Core statements as they were (``core``, copied here from the code before
the change) and the code as it is (``prepared``: ``signoff_runtime.hot``) — alternating,
``BENCH_REPEATS`` rounds (default 3), after one warm-up round each. Printed: the median process
CPU per unit (``time.process_time``: this process's CPU, the database's not included) and wall
time, per path and workload. Workloads:

- ``executor.local``: one contract of a local operation — one transaction: ``claim``, then the
  outcome with its message (``outbox.conclude``);
- ``executor.external``: one contract of an external operation — ``claim`` + ``mark_attempting``,
  commit; ``lock`` + the outcome with its messages, commit;
- ``proposals.claim`` and ``proposals.outcomes``: see ``statements_proposals``.

The FastStream half (a subscriber's layers per message) is ``signoff_bench.subscriber``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog
from pydantic import SecretStr
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import NeedsReconciliation, OperationOutcome, Succeeded
from signoff_contracts.v1 import ExecutionContract
from signoff_executor import outbox as executor_outbox
from signoff_executor import repository
from signoff_executor.tables import executions
from signoff_executor.tables import outbox as executor_outbox_table
from signoff_runtime import keys
from signoff_runtime.outbox import enqueue_statement
from signoff_runtime.settings import ContractSigningSettings
from signoff_runtime.signing import issue
from signoff_runtime.testing import servers
from signoff_runtime.topology import Topology
from sqlalchemy import func, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from signoff_bench import infra

Unit = Callable[[int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    #: path name → a function running unit ``i`` (each path gets its own units)
    paths: dict[str, Unit]


# --- the executor's statements as they were (SQLAlchemy Core), for the ``core`` path ---------

_COLUMNS = (
    "contract_id, proposal_id, status, attempt_id, idempotency_key, outcome, "
    "outcome_message_id, reconciliation_message_id"
)
_INSERTED = (
    "contract_id, proposal_id, organization_id, operation_kind, contract_version, "
    "contract_message_id, status"
)


async def _core_claim(conn: AsyncConnection, contract: ExecutionContract) -> object:
    return (
        await conn.execute(
            text(
                f"INSERT INTO executor.executions ({_INSERTED}) "  # noqa: S608
                "VALUES (:cid, :pid, :org, :kind, :ver, :mid, 'started') "
                "ON CONFLICT (contract_id) DO UPDATE SET contract_id = EXCLUDED.contract_id "
                f"RETURNING {_COLUMNS}, now() > :by AS late"
            ),
            {
                "cid": contract.contract_id,
                "pid": contract.proposal_id,
                "org": contract.organization_id,
                "kind": contract.operation_kind,
                "ver": contract.contract_version,
                "mid": contract.message_id,
                "by": contract.execute_by,
            },
        )
    ).one()


async def _core_lock(conn: AsyncConnection, contract_id: str) -> object:
    return (
        await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM executor.executions "  # noqa: S608
                "WHERE contract_id = :cid FOR UPDATE"
            ),
            {"cid": contract_id},
        )
    ).first()


async def _core_attempting(conn: AsyncConnection, contract_id: str, attempt: AttemptRef) -> None:
    await conn.execute(
        text(
            "UPDATE executor.executions SET status = 'attempting', attempt_id = :aid, "
            "idempotency_key = :key, updated_at = now() WHERE contract_id = :cid"
        ),
        {"cid": contract_id, "aid": attempt.attempt_id, "key": attempt.idempotency_key},
    )


async def _core_conclude(
    conn: AsyncConnection,
    topology: Topology,
    contract: ExecutionContract,
    outcome: OperationOutcome,
    attempt: AttemptRef | None,
) -> None:
    reconciliation = None
    if isinstance(outcome, NeedsReconciliation) and attempt is not None:
        reconciliation = executor_outbox.reconciliation_message(
            contract, attempt.attempt_id, new_id("msg")
        )
    report = executor_outbox.outcome_message(contract, outcome, new_id("msg"))
    change = (
        update(executions)
        .where(executions.c.contract_id == contract.contract_id)
        .values(
            status="done",
            outcome=outcome.model_dump(mode="json"),
            outcome_message_id=report.message_id,
            reconciliation_message_id=None if reconciliation is None else reconciliation.message_id,
            updated_at=func.now(),
        )
    )
    messages = [m for m in (reconciliation, report) if m is not None]
    outgoing = [executor_outbox._outgoing(topology, m) for m in messages]
    await conn.execute(enqueue_statement(executor_outbox_table, outgoing, change=change))


async def _prepared_conclude(
    conn: AsyncConnection,
    topology: Topology,
    contract: ExecutionContract,
    outcome: OperationOutcome,
    attempt: AttemptRef | None,
) -> None:
    await executor_outbox.conclude(conn, topology, contract, outcome, attempt)


def _contracts(n: int) -> list[ExecutionContract]:
    _, private, _ = keys.generate()
    signing = ContractSigningSettings(signing_key=SecretStr(private), key_id="bench")
    now = datetime.now(UTC)
    return [
        issue(
            signing,
            proposal_id=new_id("prp"),
            contract_id=new_id("ctr"),
            organization_id="org_bench",
            section="bench",
            resource_id=f"res_{i}",
            operation_kind="bench.op",
            contract_version=1,
            arguments={"i": i},
            approved_by="usr_bench",
            approved_at=now,
            execute_by=now + timedelta(hours=1),
        )
        for i in range(n)
    ]


def _executor_units(engine: AsyncEngine, total: int, core: bool) -> tuple[Unit, Unit]:
    """The local and the external workload's unit, on the ``core`` path or the code's."""
    topology = Topology("bench")
    succeeded = Succeeded(result={"ok": True})
    locals_, externals = _contracts(total), _contracts(total)
    claim = _core_claim if core else repository.claim
    conclude = _core_conclude if core else _prepared_conclude
    attempting = _core_attempting if core else repository.mark_attempting
    lock = _core_lock if core else repository.lock

    async def local(i: int) -> None:
        contract = locals_[i]
        async with engine.begin() as conn:
            await claim(conn, contract)
            await conclude(conn, topology, contract, succeeded, None)

    async def external(i: int) -> None:
        contract = externals[i]
        attempt = AttemptRef(attempt_id=new_id("att"), idempotency_key=new_id("idk"))
        async with engine.begin() as conn:
            await claim(conn, contract)
            await attempting(conn, contract.contract_id, attempt)
        async with engine.begin() as conn:
            await lock(conn, contract.contract_id)
            await conclude(conn, topology, contract, succeeded, attempt)

    return local, external


def executor_workloads(engine: AsyncEngine, total: int) -> list[Workload]:
    core_local, core_external = _executor_units(engine, total, core=True)
    local, external = _executor_units(engine, total, core=False)
    return [
        Workload("executor.local", {"core": core_local, "prepared": local}),
        Workload("executor.external", {"core": core_external, "prepared": external}),
    ]


# --- the harness ---------------------------------------------------------------------------


async def _measure(unit: Unit, start: int, n: int) -> tuple[float, float]:
    """CPU ms and wall ms per unit for units ``start``…``start + n - 1``."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(start, start + n):
        await unit(i)
    return (
        (time.process_time() - cpu) * 1000 / n,
        (time.perf_counter() - wall) * 1000 / n,
    )


async def compare(workloads: list[Workload], n: int, repeats: int) -> None:
    """Warm up each path, then run them alternating, ``repeats`` rounds; print the medians."""
    for workload in workloads:
        results: dict[str, list[tuple[float, float]]] = {p: [] for p in workload.paths}
        start = 0
        for unit in workload.paths.values():
            await _measure(unit, 0, min(n, 50))  # warm-up: statements prepared, caches full
        start = min(n, 50)
        for _ in range(repeats):
            for path, unit in workload.paths.items():
                results[path].append(await _measure(unit, start, n))
            start += n
        base = statistics.median(c for c, _ in results[next(iter(results))])
        for path, figures in results.items():
            cpu = statistics.median(c for c, _ in figures)
            wall = statistics.median(w for _, w in figures)
            rounds = " ".join(f"{c:.3f}" for c, _ in figures)
            _say(
                f"{workload.name:20} {path:9} CPU {cpu:7.3f} ms/unit ({cpu / base:5.0%})  "
                f"wall {wall:7.3f} ms/unit   rounds: {rounds}"
            )


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> None:
    # the services' info lines are not what is measured (and would cost both paths alike)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    n = int(os.environ.get("BENCH_N", "400"))
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    total = min(n, 50) + n * repeats
    with ExitStack() as exits:
        db = await infra.create_database(servers.postgres_url(exits))
        engine = create_async_engine(db.url, pool_size=2, max_overflow=0)
        try:
            from signoff_bench import statements_proposals

            workloads = executor_workloads(engine, total)
            workloads += await statements_proposals.workloads(engine, db, total)
            _say(f"# N={n} per round, {repeats} rounds, CPU = this process (not PostgreSQL)")
            await compare(workloads, n, repeats)
        finally:
            await engine.dispose()
            await infra.drop_database(db)


if __name__ == "__main__":
    asyncio.run(main())
