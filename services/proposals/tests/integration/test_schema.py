"""The hand-written migration and ``tables.py`` describe the same schema; audit is append-only."""

from __future__ import annotations

import pytest
from signoff_contracts.ids import new_id
from signoff_proposals.tables import SCHEMA, metadata
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

pytestmark = pytest.mark.integration


async def test_the_migrated_schema_matches_the_table_definitions(engine):
    def shape(sync_conn):
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
        table.name: (
            {c.name: c.nullable for c in table.columns},
            {i.name for i in table.indexes},
        )
        for table in metadata.tables.values()
    }
    assert migrated.keys() == declared.keys()
    for name, (columns, indexes) in declared.items():
        assert migrated[name][0] == columns, name  # same columns, same nullability
        assert indexes <= migrated[name][1], name


async def test_the_audit_trail_cannot_be_rewritten(engine):
    pid = new_id("prp")
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO proposals.proposals (id, organization_id, requested_by, section, "
                "resource_id, operation_kind, contract_version, request, arguments, preview, "
                "status, expires_at) VALUES (:p, 'org_1', 'usr_1', 's', 'r', 'k.k', 1, '{}', '{}', "
                "'{}', 'pending', now())"
            ),
            {"p": pid},
        )
        await conn.execute(
            text(
                "INSERT INTO proposals.audit (proposal_id, actor, action) "
                "VALUES (:p, 'usr_1', 'created')"
            ),
            {"p": pid},
        )
    for statement in (
        "UPDATE proposals.audit SET actor = 'someone' WHERE proposal_id = :p",
        "DELETE FROM proposals.audit WHERE proposal_id = :p",
    ):
        with pytest.raises(DBAPIError, match="append-only"):
            async with engine.begin() as conn:
                await conn.execute(text(statement), {"p": pid})
