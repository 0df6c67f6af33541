"""Retention deletes old, finished bookkeeping rows and never a row that still matters.

Rows are aged by writing their timestamps into the past (the database clock decides age): an
old sent row goes, an old UNSENT row stays however old it is, a recent sent row stays, and the
inbox is pruned by age alone. Batches: a backlog larger than one batch is cleared in one pass.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from signoff_runtime.inbox import inbox_table
from signoff_runtime.outbox import outbox_table
from signoff_runtime.retention import (
    PRUNED,
    RetentionSettings,
    inbox_rule,
    outbox_rule,
    prune_all,
)
from sqlalchemy import MetaData, Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
SCHEMA = "retention_test"
KEEP = RetentionSettings(outbox_s=3600, inbox_s=3600, batch=7)


@pytest_asyncio.fixture(loop_scope="session")
async def tables(engine: AsyncEngine) -> tuple[Table, Table]:
    metadata = MetaData()
    outbox, inbox = outbox_table(metadata, SCHEMA), inbox_table(metadata, SCHEMA)
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        await conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
        await conn.run_sync(metadata.create_all)
    return outbox, inbox


async def _outbox_rows(engine: AsyncEngine, label: str, count: int, sent: str | None) -> None:
    """``count`` rows named ``label``, created two days ago, sent at ``sent`` (SQL) or unsent."""
    sent_at = "NULL" if sent is None else sent
    async with engine.begin() as conn:
        await conn.execute(
            text(
                f"INSERT INTO {SCHEMA}.outbox (exchange, routing_key, message_id, "
                "message_type, body, created_at, sent_at) "
                "SELECT 'x', 'k', :label || '-' || n, 't', convert_to('{}', 'UTF8'), "
                f"now() - interval '2 days', {sent_at} FROM generate_series(1, :count) AS n"
            ),
            {"label": label, "count": count},
        )


async def _left(engine: AsyncEngine, table: str, prefix: str) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(
            text(f"SELECT count(*) FROM {SCHEMA}.{table} WHERE message_id LIKE :p"),
            {"p": prefix + "-%"},
        )
        return int(found.scalar_one())


async def test_old_sent_rows_go_and_unsent_or_recent_rows_stay(
    engine: AsyncEngine, tables: tuple[Table, Table]
) -> None:
    outbox, inbox = tables
    await _outbox_rows(engine, "old-sent", 20, "now() - interval '2 hours'")
    await _outbox_rows(engine, "old-unsent", 5, None)
    await _outbox_rows(engine, "recent-sent", 4, "now() - interval '10 minutes'")
    async with engine.begin() as conn:
        await conn.execute(
            text(
                f"INSERT INTO {SCHEMA}.inbox (message_id, received_at) "
                "SELECT 'old-in-' || n, now() - interval '2 hours' FROM generate_series(1, 9) n "
                "UNION ALL SELECT 'new-in-' || n, now() FROM generate_series(1, 3) n"
            )
        )
    before = PRUNED.labels(table=f"{SCHEMA}.outbox")._value.get()

    deleted = await prune_all(engine, [outbox_rule(outbox, KEEP), inbox_rule(inbox, KEEP)], 7)

    assert deleted == {f"{SCHEMA}.outbox": 20, f"{SCHEMA}.inbox": 9}  # 3 batches of 7 for 20
    assert await _left(engine, "outbox", "old-sent") == 0
    assert await _left(engine, "outbox", "old-unsent") == 5  # owed messages are never pruned
    assert await _left(engine, "outbox", "recent-sent") == 4
    assert await _left(engine, "inbox", "old-in") == 0
    assert await _left(engine, "inbox", "new-in") == 3
    assert PRUNED.labels(table=f"{SCHEMA}.outbox")._value.get() - before == 20


async def test_an_unsent_row_stays_however_old_and_a_second_pass_finds_nothing(
    engine: AsyncEngine, tables: tuple[Table, Table]
) -> None:
    outbox, _ = tables
    await _outbox_rows(engine, "ancient-unsent", 3, None)
    async with engine.begin() as conn:  # older than any window
        await conn.execute(
            text(
                f"UPDATE {SCHEMA}.outbox SET created_at = now() - interval '400 days' "
                "WHERE message_id LIKE 'ancient-unsent-%'"
            )
        )
    rule = outbox_rule(outbox, RetentionSettings(outbox_s=1))
    await prune_all(engine, [rule], 100)
    assert await prune_all(engine, [rule], 100) == {f"{SCHEMA}.outbox": 0}
    assert await _left(engine, "outbox", "ancient-unsent") == 3
