"""The hand-written migrations and the tables declared in Python describe the same schema:
``tables.py`` and any table an operation module declares on its ``metadata`` (every registered
operation is loaded first, so a new operation's own table is compared too)."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from signoff_club.tables import SCHEMA, metadata
from signoff_runtime.registry import load_operations
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def _ours(name: str | None, type_: str, _: object) -> bool:
    if type_ == "schema":
        return name == SCHEMA
    return not (type_ == "table" and name == "alembic_version")


def _diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(
        conn,
        opts={
            "include_schemas": True,
            "include_name": _ours,
            "compare_server_default": False,
        },
    )
    return list(compare_metadata(context, metadata))


async def test_migration_matches_tables(engine: AsyncEngine) -> None:
    load_operations()
    async with engine.connect() as conn:
        assert await conn.run_sync(_diff) == []
