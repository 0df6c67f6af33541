from __future__ import annotations

import pytest
from signoff_club.directory import ClubDirectory, authenticate
from signoff_club.testing import RefundWorld
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def test_memberships_come_from_the_club_tables(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    directory = ClubDirectory()
    org, other = refund_world.organization, refund_world.other_organization
    manager, viewer = org["users"]["manager"], org["users"]["viewer"]
    async with engine.connect() as conn:
        found = await directory.membership(conn, manager["id"], org["id"])
        assert found is not None
        assert (found.role, found.organization_id, found.locale) == ("manager", org["id"], "en")
        assert (await directory.membership(conn, viewer["id"], org["id"])).role == "viewer"  # type: ignore[union-attr]
        assert await directory.membership(conn, manager["id"], other["id"]) is None
        assert [m.organization_id for m in await directory.memberships(conn, viewer["id"])] == [
            org["id"]
        ]
        assert await directory.memberships(conn, "usr_nobody") == []


async def test_sign_in(engine: AsyncEngine, refund_world: RefundWorld) -> None:
    org = refund_world.organization
    manager = org["users"]["manager"]
    async with engine.connect() as conn:
        signed_in = await authenticate(conn, manager["email"].upper(), manager["password"])
        assert signed_in is not None and signed_in.user_id == manager["id"]
        assert await authenticate(conn, manager["email"], "demo-viewer") is None
        assert await authenticate(conn, "nobody@club.example", "demo-manager") is None
        other_org = refund_world.other_organization["id"]
        assert await authenticate(conn, manager["email"], manager["password"], other_org) is None


async def test_memberships_by_email_match_whatever_case_was_typed(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    """``signoff token --user manager+x@club.example`` names the person by e-mail."""
    directory = ClubDirectory()
    org = refund_world.organization
    manager = org["users"]["manager"]
    async with engine.connect() as conn:
        by_id = await directory.memberships(conn, manager["id"])
        by_email = await directory.memberships(conn, manager["email"])
        shouted = await directory.memberships(conn, f"  {manager['email'].upper()} ")
        assert by_email == shouted == by_id
        assert [(m.user_id, m.organization_id, m.role) for m in by_email] == [
            (manager["id"], org["id"], "manager")
        ]
        assert await directory.memberships(conn, "nobody@club.example") == []
        # an id is never read as an address, nor an address as an id
        assert await directory.memberships(conn, manager["email"].split("@")[0]) == []
