"""A pooled connection left inside a transaction SQLAlchemy does not know of is dropped at
checkout, so the next unit of work commits for real (``db.refuse_a_stray_transaction``)."""

from __future__ import annotations

import pytest
from signoff_runtime.db import create_engine
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.testing.databases import fresh_database
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def test_a_unit_of_work_after_a_cancelled_begin_commits_for_real(database_url: str) -> None:
    # a database of its own: the table below is no other test's business (schema comparisons)
    async with fresh_database(database_url, "signoff_stray") as url:
        engine = create_engine(DatabaseSettings(url=url, pool_size=1))
        other = create_engine(DatabaseSettings(url=url, pool_size=1))
        try:
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE stray (n int)"))
            # what a BEGIN cancelled after it reached the server leaves: the server inside a
            # transaction, asyncpg marking one as begun, SQLAlchemy's adapter holding none
            async with engine.connect() as conn:
                driver = (await conn.get_raw_connection()).driver_connection
                assert driver is not None
                await driver.execute("BEGIN")
                driver._top_xact = driver.transaction()  # asyncpg's own mark

            async with unit_of_work(engine) as uow:  # the pool's one connection, or a fresh one
                await uow.conn.execute(text("INSERT INTO stray VALUES (1)"))

            async with other.connect() as conn:
                seen = (await conn.execute(text("SELECT count(*) FROM stray"))).scalar_one()
            assert seen == 1  # committed, not released into a transaction that never ends
        finally:
            await engine.dispose()
            await other.dispose()
