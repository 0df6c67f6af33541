"""Hot statements, the proposals service's: the CPU a claim's and an outcome's statements cost
this process (issue 18).

``.venv/bin/python services/proposals/tests/perf/statements.py`` makes a fresh database and
runs, in one process, each workload ``BENCH_N`` times (default 400) through its paths side by
side — ``core`` and ``prepared``; the outcome also ``outbox`` — alternating, ``BENCH_REPEATS``
rounds (default 3), after one warm-up round each (the harness: ``signoff_runtime.testing.cpu``).
Printed: the median process CPU per unit (this process's, the database's not included) and wall
time. Workloads:

- ``proposals.claim``: one approval that claims a pending proposal, its statements as
  ``decisions.decide.approve`` runs them once its checks passed — the row read with its lock
  (``repository.get``), the approval recorded (``policies.repository.record``), THE claim
  (``transitions.transition`` ``pending → executing``: its UPDATE, then the audit row, the signed
  contract and the event in one statement) — in one transaction;
- ``proposals.outcome``: one ``OutcomeReported`` recorded alone (``recording.record``: a batch of
  one, the consumer's batch at low load): the inbox row with the lock
  (``repository.lock_delivered``), the UPDATE (``transitions._update_each``), the audit row and
  the event.

The ``core`` path runs the same code with the statements that changed put back as they were
(copied below, swapped in for its rounds only); the ``outbox`` path, only the audit + outbox
write prepared (``lifecycle.outbox.enqueue``) — the claim's locked read, quorum step and UPDATE,
the outcome's inbox+lock and UPDATE still through SQLAlchemy, as before they became hot
statements too. It calls the service's internals,
so it lives with the service's tests (``bench/`` measures through the public interfaces only);
not a test module, pytest does not collect it. The executor's: ``services/executor/tests/perf``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import asyncpg
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import OutcomeReported
from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain, transitions
from signoff_proposals.lifecycle import outbox as lifecycle_outbox
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import Step
from signoff_proposals.outcomes import recording
from signoff_proposals.policies import repository as policies
from signoff_proposals.settings import ProposalsSettings
from signoff_proposals.tables import approvals, proposals
from signoff_proposals.tables import outbox as proposals_outbox_table
from signoff_runtime import outbox as runtime_outbox
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.outbox import Outgoing
from signoff_runtime.registry import Operations
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.testing import cpu
from signoff_runtime.testing.cpu import Unit, Workload
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work
from sqlalchemy import Text, bindparam, func, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_SEED = (
    "WITH p AS (INSERT INTO proposals.proposals (id, organization_id, requested_by, section, "
    "resource_id, operation_kind, contract_version, request, arguments, preview, status, "
    "expires_at, decided_by, decided_at, contract_id, execute_by) "
    "SELECT $1 || i, 'org_bench', 'usr_proposer', 'bench', 'res_' || i, 'bench.op', 1, "
    "'{\"i\": 1}', '{\"i\": 1}', '{\"i\": 1}', $2, now() + interval '1 hour', "
    "CASE WHEN $2 = 'executing' THEN 'usr_bench' END, CASE WHEN $2 = 'executing' THEN now() END, "
    "CASE WHEN $2 = 'executing' THEN 'ctr_' || substr($1, 5) || i END, "
    "CASE WHEN $2 = 'executing' THEN now() + interval '1 hour' END "
    "FROM generate_series(0, $3 - 1) AS i RETURNING id) "
    "INSERT INTO proposals.audit (proposal_id, actor, action, detail, at) "
    "SELECT id, 'usr_proposer', 'created', "
    '\'{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}\', now() '
    "FROM p"
)


# --- the statements as they were (SQLAlchemy Core), for the ``core`` path ------------------


async def _core_enqueue(
    ctx: Context, tx: UnitOfWork, messages: Sequence[Outgoing], *, audit: Sequence[Any] = ()
) -> None:
    change = repo.audit_insert(audit) if audit else None
    await runtime_outbox.enqueue(tx.conn, proposals_outbox_table, messages, change=change)


async def _core_lock_delivered(
    conn: AsyncConnection, message_ids: Sequence[str], proposal_ids: Sequence[str]
) -> tuple[set[str], dict[str, Any]]:
    rows = (
        await conn.execute(
            text(
                "WITH ins AS (INSERT INTO proposals.inbox (message_id) "
                "SELECT unnest(CAST(:mids AS text[])) ON CONFLICT DO NOTHING RETURNING message_id) "
                "SELECT p.id, p.status, p.contract_id, ARRAY(SELECT message_id FROM ins) AS fresh "
                "FROM proposals.proposals p WHERE p.id = ANY(CAST(:pids AS text[])) "
                "ORDER BY p.id FOR UPDATE OF p"
            ),
            {"mids": list(dict.fromkeys(message_ids)), "pids": sorted(set(proposal_ids))},
        )
    ).all()
    fresh = set(rows[0].fresh) if rows else set()
    # read by name (``row["status"]``) as the caller now reads asyncpg's Records
    return fresh, {row.id: row._mapping for row in rows}


async def _core_update_each(
    tx: UnitOfWork, moves: Sequence[transitions.Move], steps: Mapping[int, Step]
) -> list[Any]:
    """The outcome UPDATE as it was: an ``update()`` construct built on every call (its rows
    are SQLAlchemy ``Row``\\ s, read by attribute as the ``Fields`` that replaced them)."""
    names = sorted({name for each in moves for name in each.values})
    same = {n: moves[0].values[n] for n in names if moves[0].values[n] is repo.DB_CLOCK}
    each_row = [n for n in names if n not in same]
    columns: dict[str, tuple[list[Any], Any]] = {
        "id": ([m.proposal_id for m in moves], Text()),
        "source": ([m.source.value for m in moves], Text()),
        "target": ([m.target.value for m in moves], Text()),
        **{n: ([m.values[n] for m in moves], proposals.c[n].type) for n in each_row},
    }
    arrays = [
        bindparam(f"each_{name}", values, type_=ARRAY(type_))
        for name, (values, type_) in columns.items()
    ]
    given = func.unnest(*arrays).table_valued(*columns).render_derived(name="each")
    returning: list[Any] = list(proposals.c)
    if any(step.sends_contract for step in steps.values()):
        returning.append(repo.origin_trace())
    stmt = (
        update(proposals)
        .where(proposals.c.id == given.c.id, proposals.c.status == given.c.source)
        .values(status=given.c.target, **{n: given.c[n] for n in each_row}, **same)
        .returning(*returning)
    )
    rows = (await tx.conn.execute(stmt)).all()
    for row in rows:
        transitions._count(tx, row, ProposalStatus(row.status))
    return list(rows)


async def _core_get(conn: AsyncConnection, proposal_id: str, *, lock: bool = False) -> Any:
    """The claim's locked read as it was: a ``text()`` construct (the claim reads it locked)."""
    assert lock
    locked = text(
        "SELECT p.*, p.expires_at <= statement_timestamp() AS lapsed "
        "FROM proposals.proposals p WHERE p.id = :id FOR UPDATE"
    )
    return (await conn.execute(locked, {"id": proposal_id})).first()


async def _core_record(
    conn: AsyncConnection, proposal_id: str, approver: str, role: str, **_: Any
) -> Any:
    """The quorum step's statement as it was (a policy of one approver: no audit row)."""
    inserted = (
        pg_insert(approvals)
        .values(proposal_id=proposal_id, approver=approver, role=role)
        .on_conflict_do_nothing(index_elements=["proposal_id", "approver"])
        .returning(approvals.c.proposal_id, approvals.c.approved_at)
        .cte("recorded")
    )
    mark = func.jsonb_build_array(
        func.jsonb_build_object(
            "user_id", approver, "role", role, "at", func.to_jsonb(inserted.c.approved_at)
        )
    )
    stmt = (
        update(proposals)
        .where(proposals.c.id == inserted.c.proposal_id)
        .values(approvals=proposals.c.approvals.op("||")(mark))
        .returning(*proposals.c)
    )
    return (await conn.execute(stmt)).first()


async def _core_transition(
    ctx: Context,
    tx: UnitOfWork,
    proposal_id: str,
    *,
    source: ProposalStatus,
    target: ProposalStatus,
    actor: str,
    values: dict[str, Any] | None = None,
    **_: Any,
) -> Any:
    """The claim's UPDATE as it was: an ``update()`` construct built on every call (what
    ``transitions._update`` still builds for expiry), the clock offsets as Core expressions."""
    move = domain.step(source, target)
    given = {
        name: repo.DB_CLOCK + value.by if isinstance(value, repo.Later) else value
        for name, value in (values or {}).items()
    }
    rows = await transitions._update(tx, move, [proposals.c.id == proposal_id], given)
    await transitions._record(ctx, tx, move, rows, actor, {}, None)
    return rows[0] if rows else None


@contextmanager
def _core(*, outbox: bool) -> Iterator[None]:
    """The changed statements put back as they were, for one round of a path: the claim's
    locked read, quorum step and UPDATE, the outcome's inbox+lock and UPDATE, and with
    ``outbox`` the audit + outbox write too."""
    swaps: list[tuple[Any, str, Any]] = [
        (repo, "lock_delivered", _core_lock_delivered),
        (transitions, "_update_each", _core_update_each),
        (repo, "get", _core_get),
        (policies, "record", _core_record),
        (transitions, "transition", _core_transition),
    ]
    if outbox:
        swaps.append((lifecycle_outbox, "enqueue", _core_enqueue))
    with ExitStack() as stack:
        for module, name, core in swaps:
            stack.enter_context(mock.patch.object(module, name, core))
        yield


def _path(path: str, unit: Unit) -> Unit:
    if path == "prepared":
        return unit

    async def core(i: int) -> None:
        with _core(outbox=path == "core"):
            await unit(i)

    return core


async def workloads(engine: AsyncEngine, url: str, total: int) -> list[Workload]:
    """The two workloads, each path with ``total`` proposals of its own seeded for it."""
    settings = ProposalsSettings(env="test", db=DatabaseSettings(url=url))
    ctx = Context(
        settings=settings,
        engine=engine,
        topology=Topology("bench"),
        operations=Operations([]),
        directory=None,  # type: ignore[arg-type]  # the checks before the claim are not run
    )
    execute_within = timedelta(seconds=settings.contracts.execute_within_s)
    stuck_after = timedelta(seconds=settings.proposals.stuck_after_s)
    seeder = await asyncpg.connect(asyncpg_dsn(url))
    claims: dict[str, Unit] = {}
    outcomes: dict[str, Unit] = {}
    try:
        for path in ("core", "outbox", "prepared"):
            pending, executing = f"prp_c{path}x", f"prp_o{path}x"
            await seeder.execute(_SEED, pending, "pending", total)
            await seeder.execute(_SEED, executing, "executing", total)

            async def claim(i: int, prefix: str = pending) -> None:
                proposal_id = f"{prefix}{i}"
                async with unit_of_work(engine) as tx:
                    row = await repo.get(tx.conn, proposal_id, lock=True)
                    assert row is not None and row.status == "pending"
                    await policies.record(tx.conn, proposal_id, "usr_bench", "manager")
                    claimed = await transitions.transition(
                        ctx,
                        tx,
                        proposal_id,
                        source=ProposalStatus.PENDING,
                        target=ProposalStatus.EXECUTING,
                        actor="usr_bench",
                        values={
                            "decided_by": "usr_bench",
                            "decided_at": repo.DB_CLOCK,
                            "contract_id": new_id("ctr"),
                            "execute_by": repo.Later(execute_within),
                            "republish_after": repo.Later(stuck_after),
                        },
                    )
                    assert claimed is not None

            async def outcome(i: int, prefix: str = executing) -> None:
                report = OutcomeReported(
                    proposal_id=f"{prefix}{i}",
                    contract_id=f"ctr_{prefix[4:]}{i}",
                    operation_kind="bench.op",
                    outcome=Succeeded(result={"i": i}),
                    correlation_id=f"{prefix}{i}",
                )
                assert await recording.record(ctx, report)

            claims[path] = _path(path, claim)
            outcomes[path] = _path(path, outcome)
    finally:
        await seeder.close()
    return [Workload("proposals.claim", claims), Workload("proposals.outcome", outcomes)]


if __name__ == "__main__":
    asyncio.run(cpu.run(workloads))
