"""A pooled connection left inside a transaction SQLAlchemy does not know of is dropped at
checkout, so the next unit of work commits for real (``db.refuse_a_stray_transaction``)."""

from __future__ import annotations

import pytest
from signoff_contracts.ids import new_id
from signoff_runtime.db import create_engine
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def test_a_unit_of_work_after_a_cancelled_begin_commits_for_real(database_url: str) -> None:
    engine = create_engine(DatabaseSettings(url=database_url, pool_size=1))
    table = f"stray_{new_id('t')}"
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"CREATE TABLE {table} (n int)"))
        # what a BEGIN cancelled after it reached the server leaves behind: the server inside a
        # transaction, asyncpg marking one as begun, SQLAlchemy's adapter holding none
        async with engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            await driver.execute("BEGIN")
            driver._top_xact = driver.transaction()  # asyncpg's own mark

        async with unit_of_work(engine) as uow:  # the pool's one connection, or a fresh one
            await uow.conn.execute(text(f"INSERT INTO {table} VALUES (1)"))

        other = create_engine(DatabaseSettings(url=database_url, pool_size=1))
        try:
            async with other.connect() as conn:
                seen = (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
        finally:
            await other.dispose()
        assert seen == 1  # committed, not released into a transaction that never ends
    finally:
        await engine.dispose()
        async with create_engine(DatabaseSettings(url=database_url)).begin() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
