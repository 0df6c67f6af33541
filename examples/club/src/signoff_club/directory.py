"""Who belongs to which club with which role: the ``Directory`` the lifecycle services use.

Roles are read at the moment of asking (approval, token issue), never cached: a manager
removed from a club loses the power to approve in the same instant.

``authenticate`` is how the web signs people in (through the ``signoff.directory`` entry
point). Password hashing runs in a worker thread, never on the event loop; a hash of an older
scheme or weaker parameters (``passwords.needs_rehash``) is replaced by an argon2id one after a
successful sign-in — best effort: where the caller's role may not write ``club.users`` the
old hash stays (it still verifies) and a warning says so.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

import structlog
from signoff_contracts.operations import Membership
from signoff_contracts.roster import Contact
from signoff_runtime import hot
from sqlalchemy import Row, Select, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t
from signoff_club.passwords import hash_password, needs_rehash, verify_password

log = structlog.get_logger(__name__)

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


#: ``_query`` for one person in one club, as fixed SQL: ``membership`` runs on every approval and
#: every execution (the roles are re-checked there), so it is a hot statement
#: (``signoff_runtime.hot``, prepared once per connection), not SQLAlchemy Core built per call
_ONE = (
    "SELECT m.user_id, m.organization_id, m.role, u.display_name, u.locale "  # noqa: S608
    f"FROM {t.memberships.fullname} m JOIN {t.users.fullname} u ON u.id = m.user_id "
    f"JOIN {t.organizations.fullname} o ON o.id = m.organization_id "
    "WHERE m.user_id = $1 AND m.organization_id = $2"
)


class ClubDirectory:
    async def membership(
        self, conn: AsyncConnection, user_id: str, organization_id: str
    ) -> Membership | None:
        row = await hot.fetchrow(conn, _ONE, user_id, organization_id)
        return None if row is None else Membership.model_validate(dict(row.items()))

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

    async def contacts(self, conn: AsyncConnection, organization_id: str) -> list[Contact]:
        """Every member of the club with their address (the notifier's ``Roster``)."""
        rows = await conn.execute(
            select(*_COLUMNS, t.users.c.email)
            .join_from(t.memberships, t.users, t.memberships.c.user_id == t.users.c.id)
            .where(t.memberships.c.organization_id == organization_id)
            .order_by(t.memberships.c.user_id)
        )
        return [Contact.model_validate(dict(row._mapping)) for row in rows]

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
        stored = user.password_hash if user else await asyncio.to_thread(_decoy_hash)
        if not await asyncio.to_thread(verify_password, password, stored):
            return None
        if user is None:
            return None
        if needs_rehash(stored):
            await _upgrade_hash(conn, user.id, stored, password)
        if organization_id is not None:
            return await self.membership(conn, user.id, organization_id)
        found = await self.memberships(conn, user.id)
        return found[0] if found else None


async def _upgrade_hash(conn: AsyncConnection, user_id: str, old: str, password: str) -> None:
    """Replace ``old`` by an argon2id hash of the password that just verified against it (only
    if it is still the stored one: a concurrent change of password wins)."""
    new = await asyncio.to_thread(hash_password, password)
    try:
        async with conn.begin_nested():
            await conn.execute(
                t.users.update()
                .where(t.users.c.id == user_id, t.users.c.password_hash == old)
                .values(password_hash=new)
            )
    except DBAPIError as exc:  # e.g. a read-only role: the old hash still verifies
        log.warning("directory.rehash_refused", user_id=user_id, error=type(exc.orig).__name__)
        return
    log.info("directory.password_rehashed", user_id=user_id, scheme="argon2id")


@cache
def _decoy_hash() -> str:
    """Verified against for unknown emails, so they cost the same argon2id as known ones."""
    return hash_password("not-a-password-anyone-has")


async def authenticate(
    conn: AsyncConnection, email: str, password: str, organization_id: str | None = None
) -> Membership | None:
    """Module-level shortcut for the web sign-in."""
    return await ClubDirectory().authenticate(conn, email, password, organization_id)
