"""The toy domain's directory: who belongs to which organization with which role.

A table (``conformance_toy.members``, made by ``create_schema``) read on the caller's connection,
so the executor's re-check of an approver sees what its own transaction sees, and a test can
change a membership while a service process is running (a member removed after their token was
issued). It is also a ``Roster``: every member is reached at ``<user_id>@example.test``.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.ids import new_id
from signoff_contracts.operations import Membership
from signoff_contracts.roster import Contact
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


class ToyDirectory:
    """A ``Directory`` and a ``Roster`` over ``conformance_toy.members``."""

    async def membership(self, conn: Any, user_id: str, organization_id: str) -> Membership | None:
        row = (
            await conn.execute(
                text(
                    "SELECT role FROM conformance_toy.members "
                    "WHERE user_id = :u AND organization_id = :o"
                ),
                {"u": user_id, "o": organization_id},
            )
        ).first()
        if row is None:
            return None
        return Membership(user_id=user_id, organization_id=organization_id, role=row.role)

    async def memberships(self, conn: Any, user_id: str) -> list[Membership]:
        rows = await conn.execute(
            text("SELECT organization_id, role FROM conformance_toy.members WHERE user_id = :u"),
            {"u": user_id},
        )
        return [
            Membership(user_id=user_id, organization_id=r.organization_id, role=r.role)
            for r in rows
        ]

    async def contacts(self, conn: Any, organization_id: str) -> list[Contact]:
        rows = await conn.execute(
            text(
                "SELECT user_id, role FROM conformance_toy.members "
                "WHERE organization_id = :o ORDER BY user_id"
            ),
            {"o": organization_id},
        )
        return [
            Contact(
                user_id=r.user_id,
                organization_id=organization_id,
                role=r.role,
                email=f"{r.user_id}@example.test",
            )
            for r in rows
        ]


async def add_member(
    conn: AsyncConnection, organization_id: str, role: str, user_id: str | None = None
) -> str:
    """Make ``user_id`` (a new person by default) a member of the organization with ``role``
    (a member already keeps the membership with the new role); their id."""
    user_id = user_id or new_id("usr")
    await conn.execute(
        text(
            "INSERT INTO conformance_toy.members VALUES (:u, :o, :r) "
            "ON CONFLICT (user_id, organization_id) DO UPDATE SET role = :r"
        ),
        {"u": user_id, "o": organization_id, "r": role},
    )
    return user_id


async def remove_member(conn: AsyncConnection, organization_id: str, user_id: str) -> None:
    """End the person's membership of the organization."""
    await conn.execute(
        text("DELETE FROM conformance_toy.members WHERE user_id = :u AND organization_id = :o"),
        {"u": user_id, "o": organization_id},
    )
