"""The test domain's directory: members of the test organization, read on the caller's
connection (so the executor's check sees what its transaction sees)."""

from __future__ import annotations

from typing import Any

from signoff_contracts.operations import Membership
from sqlalchemy import text

from support.domain import SCHEMA


class MembersDirectory:
    async def membership(self, conn: Any, user_id: str, organization_id: str) -> Membership | None:
        row = (
            await conn.execute(
                text(
                    f"SELECT user_id, organization_id, role FROM {SCHEMA}.members "
                    "WHERE user_id = :u AND organization_id = :o"
                ),
                {"u": user_id, "o": organization_id},
            )
        ).first()
        return None if row is None else Membership.model_validate(dict(row._mapping))

    async def memberships(self, conn: Any, user_id: str) -> list[Membership]:
        rows = await conn.execute(
            text(f"SELECT user_id, organization_id, role FROM {SCHEMA}.members WHERE user_id = :u"),
            {"u": user_id},
        )
        return [Membership.model_validate(dict(row._mapping)) for row in rows]
