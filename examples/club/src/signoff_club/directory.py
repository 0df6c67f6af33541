"""Who belongs to which club with which role: the ``Directory`` the lifecycle services use.

Roles are read at the moment of asking (approval, token issue), never cached: a manager
removed from a club loses the power to approve in the same instant.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from signoff_contracts.operations import Membership
from sqlalchemy import Row, Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t
from signoff_club.passwords import hash_password, verify_password

_COLUMNS = (
    t.memberships.c.user_id,
    t.memberships.c.organization_id,
    t.memberships.c.role,
    t.users.c.display_name,
    t.users.c.locale,
)


def _query() -> Select[Any]:
    return (
        select(*_COLUMNS)
        .join_from(t.memberships, t.users, t.memberships.c.user_id == t.users.c.id)
        .join(t.organizations, t.organizations.c.id == t.memberships.c.organization_id)
    )


def _membership(row: Row[Any]) -> Membership:
    return Membership.model_validate(dict(row._mapping))


class ClubDirectory:
    async def membership(
        self, conn: AsyncConnection, user_id: str, organization_id: str
    ) -> Membership | None:
        row = (
            await conn.execute(
                _query().where(
                    t.memberships.c.user_id == user_id,
                    t.memberships.c.organization_id == organization_id,
                )
            )
        ).first()
        return None if row is None else _membership(row)

    async def memberships(self, conn: AsyncConnection, user_id: str) -> list[Membership]:
        """Every club of the person named by id (``usr_…``) or by e-mail address.

        The e-mail form is for people at a terminal (``signoff token --user manager@…``);
        addresses are stored lower-case, so it matches whatever case was typed. The
        parameter keeps the ``Directory`` protocol's name so keyword callers still work.
        """
        who = (
            t.users.c.email == user_id.strip().lower()
            if "@" in user_id
            else t.memberships.c.user_id == user_id
        )
        rows = await conn.execute(
            _query().where(who).order_by(t.organizations.c.created_at, t.organizations.c.id)
        )
        return [_membership(row) for row in rows]

    async def authenticate(
        self,
        conn: AsyncConnection,
        email: str,
        password: str,
        organization_id: str | None = None,
    ) -> Membership | None:
        """The signed-in person's membership (in ``organization_id``, or their first club),
        or ``None`` — the same ``None``, after the same work, for an unknown email."""
        user = (
            await conn.execute(
                select(t.users.c.id, t.users.c.password_hash).where(
                    t.users.c.email == email.strip().lower()
                )
            )
        ).first()
        if not verify_password(password, user.password_hash if user else _decoy_hash()):
            return None
        if user is None:
            return None
        if organization_id is not None:
            return await self.membership(conn, user.id, organization_id)
        found = await self.memberships(conn, user.id)
        return found[0] if found else None


@cache
def _decoy_hash() -> str:
    """Verified against for unknown emails, so they cost the same scrypt as known ones."""
    return hash_password("not-a-password-anyone-has")


async def authenticate(
    conn: AsyncConnection, email: str, password: str, organization_id: str | None = None
) -> Membership | None:
    """Module-level shortcut for the web sign-in."""
    return await ClubDirectory().authenticate(conn, email, password, organization_id)
