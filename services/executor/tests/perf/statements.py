"""Hot statements, the executor's: the CPU a contract's statements cost this process (issue 18).

``.venv/bin/python services/executor/tests/perf/statements.py`` makes a fresh database and runs,
in one process, each workload ``BENCH_N`` times (default 400) through two paths side by side —
the SQLAlchemy Core statements as they were (``core``, copied here from the code before the
change) and the code as it is (``prepared``: ``signoff_runtime.hot``) — alternating,
``BENCH_REPEATS`` rounds (default 3), after one warm-up round each (the harness:
``signoff_runtime.testing.cpu``). Printed: the median process CPU per unit (this process's, the
database's not included) and wall time, per path and workload. Workloads:

- ``executor.local``: one contract of a local operation — one transaction: ``claim``, then the
  outcome with its message (``outbox.conclude``);
- ``executor.external``: one contract of an external operation — ``claim`` + ``mark_attempting``,
  commit; ``lock`` + the outcome with its messages, commit.

It calls the service's internals, so it lives with the service's tests (``bench/`` measures
through the public interfaces only); not a test module, pytest does not collect it. The
proposals' claim and outcome: ``services/proposals/tests/perf/statements.py``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

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
from signoff_runtime.testing import cpu
from signoff_runtime.testing.cpu import Unit, Workload
from signoff_runtime.topology import Topology
from sqlalchemy import func, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

# --- the executor's statements as they were (SQLAlchemy Core), for the ``core`` path ---------

_COLUMNS, _INSERTED = repository._COLUMNS, repository._INSERTED  # the same rows, either path


async def _core_claim(conn: AsyncConnection, contract: ExecutionContract) -> object:
    return (
        await conn.execute(
            text(
                f"INSERT INTO executor.executions ({_INSERTED}) "
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
            text(f"SELECT {_COLUMNS} FROM executor.executions WHERE contract_id = :cid FOR UPDATE"),
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


async def workloads(engine: AsyncEngine, url: str, total: int) -> list[Workload]:
    """The two workloads, each path with ``total`` units of its own (``url``: not needed)."""
    core_local, core_external = _executor_units(engine, total, core=True)
    local, external = _executor_units(engine, total, core=False)
    return [
        Workload("executor.local", {"core": core_local, "prepared": local}),
        Workload("executor.external", {"core": core_external, "prepared": external}),
    ]


if __name__ == "__main__":
    asyncio.run(cpu.run(workloads))
