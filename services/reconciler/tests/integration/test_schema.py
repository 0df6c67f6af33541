"""The hand-written migrations and ``tables.py`` describe the same schema."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_reconciler.tables import SCHEMA, metadata
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def test_the_migrated_schema_matches_the_table_definitions(engine: AsyncEngine) -> None:
    def shape(sync_conn: Any) -> dict[str, Any]:
        inspector = inspect(sync_conn)
        return {
            table: (
                {c["name"]: c["nullable"] for c in inspector.get_columns(table, schema=SCHEMA)},
                {i["name"] for i in inspector.get_indexes(table, schema=SCHEMA)},
            )
            for table in inspector.get_table_names(schema=SCHEMA)
            if table != "alembic_version"
        }

    async with engine.connect() as conn:
        migrated = await conn.run_sync(shape)

    declared = {
        table.name: ({c.name: c.nullable for c in table.columns}, {i.name for i in table.indexes})
        for table in metadata.tables.values()
    }
    assert migrated.keys() == declared.keys()
    for name, (columns, indexes) in declared.items():
        assert migrated[name][0] == columns, name
        assert indexes <= migrated[name][1], name
