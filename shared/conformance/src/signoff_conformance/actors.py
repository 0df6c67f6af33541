"""The people a case needs, as the domain's own directory sees them now."""

from __future__ import annotations

from signoff_contracts.operations import Actor, Directory
from sqlalchemy.ext.asyncio import AsyncEngine


async def actors(
    engine: AsyncEngine, directory: Directory, organization_id: str, *, manager: str, viewer: str
) -> tuple[Actor, Actor]:
    """``(manager, viewer)`` for ``ConformanceCase``: the two user ids with the roles
    ``directory`` gives them in ``organization_id`` (it must say ``manager`` and ``viewer``)."""
    found = []
    async with engine.connect() as conn:
        for user_id, role in ((manager, "manager"), (viewer, "viewer")):
            member = await directory.membership(conn, user_id, organization_id)
            assert member is not None, f"{user_id} is not a member of {organization_id}"
            assert member.role == role, f"{user_id} is a {member.role}, not a {role}"
            found.append(Actor(user_id=user_id, organization_id=organization_id, role=role))
    return found[0], found[1]
