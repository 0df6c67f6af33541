"""One statement's CPU in this process: through SQLAlchemy Core, and on the driver (``hot``).

``PYTHONPATH=bench .venv/bin/python -m signoff_bench.statements`` makes a fresh, migrated
database, then on one connection, inside one transaction, runs each of these ``BENCH_N`` times
(default 3000, after 200 unmeasured), ``BENCH_REPEATS`` rounds (default 3), the ways alternating
within each round:

- ``get``: a proposal read by id (a copy of ``repository.get``'s statement: the bench imports no
  service's code; no row found), as SQLAlchemy Core builds it, and as fixed SQL on the asyncpg
  connection (``signoff_runtime.hot``);
- ``savepoint``: SAVEPOINT then RELEASE, as SQLAlchemy's nested transaction sends them, and as
  ``UnitOfWork.savepoint`` does now;
- ``read-only``: the intake's guard around an operation's ``resolve`` — before, SQLAlchemy's
  nested transaction, ``SET LOCAL transaction_read_only`` through ``text()`` and its rollback;
  now ``unit_of_work.read_only`` (two simple-protocol round trips).

Printed: each way's process CPU per call (``time.process_time``), median and every round, and
the load average. The round trip itself is in both ways' figures; the difference is what
SQLAlchemy's per-call work costs here.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack

from signoff_runtime import hot
from signoff_runtime.testing import servers
from signoff_runtime.unit_of_work import UnitOfWork, read_only
from sqlalchemy import DateTime, MetaData, Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from signoff_bench import infra

Call = Callable[[AsyncConnection, int], Awaitable[object]]

#: the proposals table as the database has it (reflected: the bench imports no service's code)
proposals = Table("proposals", MetaData(schema="proposals"))
DB_CLOCK = func.statement_timestamp(type_=DateTime(timezone=True))

_GET = (
    "SELECT p.*, p.expires_at <= statement_timestamp() AS lapsed "
    "FROM proposals.proposals p WHERE p.id = $1"
)


async def _core_get(conn: AsyncConnection, i: int) -> object:
    lapsed = (proposals.c.expires_at <= DB_CLOCK).label("lapsed")
    stmt = select(*proposals.c, lapsed).where(proposals.c.id == f"prp_{i}")
    return (await conn.execute(stmt)).first()


async def _hot_get(conn: AsyncConnection, i: int) -> object:
    return await hot.fetchrow(conn, _GET, f"prp_{i}")


async def _core_savepoint(conn: AsyncConnection, _: int) -> object:
    nested = await conn.begin_nested()
    await nested.commit()
    return None


async def _hot_savepoint(conn: AsyncConnection, _: int) -> object:
    async with UnitOfWork(conn).savepoint():
        return None


async def _core_read_only(conn: AsyncConnection, _: int) -> object:
    nested = await conn.begin_nested()
    await conn.execute(text("SET LOCAL transaction_read_only = on"))
    await nested.rollback()
    return None


async def _hot_read_only(conn: AsyncConnection, _: int) -> object:
    async with read_only(conn):
        return None


WAYS: dict[str, tuple[Call, Call]] = {
    "get": (_core_get, _hot_get),
    "savepoint": (_core_savepoint, _hot_savepoint),
    "read-only": (_core_read_only, _hot_read_only),
}


async def _cpu_per_call(conn: AsyncConnection, call: Call, n: int) -> float:
    """Microseconds of this process's CPU per call, over ``n`` calls after 200 unmeasured."""
    for i in range(200):
        await call(conn, i)
    started = time.process_time()
    for i in range(n):
        await call(conn, i)
    return (time.process_time() - started) / n * 1e6


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "3000"))
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    figures: dict[str, list[float]] = {f"{s} {w}": [] for s in WAYS for w in ("core", "hot")}
    with ExitStack() as exits:
        db = await infra.create_database(servers.postgres_url(exits))
        engine = create_async_engine(db.url)
        try:
            async with engine.connect() as conn:
                await conn.run_sync(
                    proposals.metadata.reflect, only=["proposals"], extend_existing=True
                )
            for _ in range(repeats):
                for statement, ways in WAYS.items():
                    for way, call in zip(("core", "hot"), ways, strict=True):
                        async with engine.begin() as conn:
                            cpu = await _cpu_per_call(conn, call, n)
                        figures[f"{statement} {way}"].append(cpu)
        finally:
            await engine.dispose()
            await infra.drop_database(db)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    _say(f"# N={n} calls a round, {repeats} rounds; CPU of this process; load average {load}")
    _say(f"{'statement':22} {'median':>7}  rounds (µs a call)")
    for name, rounds_cpu in figures.items():
        rounds = " ".join(f"{c:.0f}" for c in rounds_cpu)
        _say(f"{name:22} {statistics.median(rounds_cpu):7.0f}  {rounds}")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
