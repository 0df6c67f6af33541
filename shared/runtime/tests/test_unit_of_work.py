"""The unit of work: after-commit actions run only after a commit (an in-doubt commit is
the executor's ``test_in_doubt``, through a proxy that really cuts the COMMIT)."""

from __future__ import annotations

import pytest
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def _table(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS uow_rows (id int PRIMARY KEY)"))
        await conn.execute(text("TRUNCATE uow_rows"))


async def _count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM uow_rows"))).scalar_one())


async def test_after_commit_actions_run_once_committed_in_order(engine: AsyncEngine) -> None:
    await _table(engine)
    seen: list[str] = []

    async def published() -> None:
        seen.append(f"published with {await _count(engine)} row(s) visible")

    async with unit_of_work(engine) as uow:
        await uow.conn.execute(text("INSERT INTO uow_rows VALUES (1)"))
        uow.after_commit(lambda: seen.append("counted"))
        uow.after_commit(published)
        assert seen == []  # nothing before the commit
    assert seen == ["counted", "published with 1 row(s) visible"]


async def test_a_rolled_back_unit_runs_nothing_after(engine: AsyncEngine) -> None:
    await _table(engine)
    seen: list[str] = []
    with pytest.raises(RuntimeError):
        async with unit_of_work(engine) as uow:
            await uow.conn.execute(text("INSERT INTO uow_rows VALUES (1)"))
            uow.after_commit(lambda: seen.append("counted"))
            raise RuntimeError("the handler failed")
    assert seen == [] and await _count(engine) == 0
