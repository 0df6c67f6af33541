"""Hot statements run in the caller's transaction, and a connection lost under one is not
handed out again by the pool (SQLAlchemy invalidates a lost connection only for its own
statements; ``hot`` does it for its)."""

from __future__ import annotations

import pytest
from signoff_runtime import hot
from signoff_runtime.testing import wait_until
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

pytestmark = pytest.mark.integration


async def test_a_hot_statement_first_in_a_transaction_is_inside_it(database_url: str) -> None:
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            await conn.begin()
            first = await hot.fetchrow(conn, "SELECT txid_current() AS x")
            second = (await conn.execute(text("SELECT txid_current()"))).scalar_one()
            await conn.rollback()
        assert first is not None and first["x"] == second
    finally:
        await engine.dispose()


async def test_a_record_reads_by_attribute_as_a_row_does(database_url: str) -> None:
    """``Fields`` stands in for SQLAlchemy's ``Row`` in code that reads by attribute: the same
    values (jsonb decoded, timestamps aware) and ``getattr``'s default for a name not there."""
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    sql = "SELECT '{\"a\": [1]}'::jsonb AS doc, now() AS at, 'x' AS name"
    try:
        async with engine.connect() as conn:
            record = await hot.fetchrow(conn, sql)
            row = (await conn.execute(text(sql))).one()
            await conn.rollback()
        assert record is not None
        fields = hot.Fields(record)
        assert (fields.doc, fields.at, fields.name) == (row.doc, row.at, row.name)
        assert fields.doc == {"a": [1]} and fields.at.tzinfo is not None
        assert getattr(fields, "absent", "default") == "default"
        with pytest.raises(AttributeError):
            _ = fields.absent
    finally:
        await engine.dispose()


#: a lost link fails the first statement in one of two ways, by a race of the server's goodbye
#: with the BEGIN sent after it: "connection is closed", or asyncpg's "another operation is in
#: progress" (the connection closed all the same); rounds enough that both come up
ROUNDS = 10


async def test_a_connection_lost_under_a_hot_statement_is_not_reused(database_url: str) -> None:
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    other = create_async_engine(database_url)
    failures: set[str] = set()
    try:
        for _ in range(ROUNDS):
            async with engine.connect() as conn:
                pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                await conn.commit()
            await _terminate(other, pid)
            async with engine.connect() as conn:
                with pytest.raises(Exception) as lost:  # whichever error the lost link gives
                    await hot.fetchrow(conn, "SELECT 1 AS one")
                failures.add(type(lost.value).__name__)
            async with engine.connect() as conn:  # the pool's one slot: a fresh connection
                row = await hot.fetchrow(conn, "SELECT 1 AS one")
            assert row is not None and row["one"] == 1, failures
    finally:
        await engine.dispose()
        await other.dispose()


async def _terminate(other: AsyncEngine, pid: int) -> None:
    """End backend ``pid`` through ``other`` and wait until the server has let it go — asking
    again at once, so the terminated connection's client may not have heard of it yet."""
    async with other.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})

    async def gone() -> bool | None:
        async with other.connect() as conn:
            query = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p")
            return (await conn.execute(query, {"p": pid})).scalar_one() == 0 or None

    await wait_until(gone, timeout=10, interval=0.0, what=f"backend {pid} gone")
